package regionsim_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemtest"
)

// TestLayer1ReconciledTTLDeleteFromTheOtherRegion: under
// reconciled-records IdempotencyTable keeps its TTL in every replica, and
// TTL deletes are region-local: each replica deletes the items it holds
// expired, and the deletion replicates, last writer wins, made by the
// service principal in both regions' streams. A key answered in eu,
// replicated, is sent again in eu past its retention and claimed anew,
// rightly (a new run), while us still holds the old, expired item; us's
// TTL deletes that item before eu's new record reaches it. The deletion is
// the key's newest write, so replication deletes eu's new record in both
// regions, within its retention: a duplicate of the new request would run
// the handler again (a second run for one request). eu's auditor reads a
// TTL deletion of a record TTL could not have deleted there (live at the
// deletion's time), so it is the other region's deletion of an older
// item: it writes the record back, and both regions end on the new run.
func TestLayer1ReconciledTTLDeleteFromTheOtherRegion(t *testing.T) {
	var runs atomic.Int32
	var w *audited
	w = newAudited(t, auditedConfig{ttlRemoves: true,
		guardClock: func(string) idem.Clock {
			return idemtest.ClockFuncs{NowFunc: func() time.Time { return w.clock.Now() }}
		},
		handler: func(string) http.HandlerFunc {
			return func(rw http.ResponseWriter, _ *http.Request) {
				n := runs.Add(1)
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusCreated)
				_, _ = fmt.Fprintf(rw, `{"runId":"acme/run-%d","status":"pending"}`, n)
			}
		}})
	if r, b := w.post(eu); r.StatusCode != http.StatusCreated || !strings.Contains(b, "acme/run-1") {
		t.Fatalf("eu: %d %s", r.StatusCode, b)
	}
	w.sync()
	w.clock.Advance(25 * time.Hour) // past the record's retention (24 h)
	if r, b := w.post(eu); r.StatusCode != http.StatusCreated || !strings.Contains(b, "acme/run-2") {
		t.Fatalf("eu, past the retention: %d %s; want a new run", r.StatusCode, b)
	}
	w.step(10 * time.Millisecond) // eu's new claim and completion observed, not yet applied
	old := onlyRecord(t, w.p, us)
	if _, err := w.p.db(us).DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(w.p.tables[us]),
		Key: map[string]types.AttributeValue{"pk": old["pk"]}}); err != nil { // us's TTL: the old item, expired
		t.Fatal(err)
	}
	w.step(0) // us's deletion observed, the key's newest write
	w.heal(false)
	for _, r := range []string{eu, us} {
		rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
		if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), "acme/run-2") {
			t.Fatalf("%s's replica holds %s (%v); want the new record naming acme/run-2", r, body(&rec), err)
		}
	}
	for _, r := range []string{eu, us} {
		if resp, b := w.post(r); resp.Header.Get("OpenWOP-Idempotent-Replay") != "true" || !strings.Contains(b, "acme/run-2") {
			t.Fatalf("%s: the new request again: %d %s; want a replay of acme/run-2", r, resp.StatusCode, b)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("the handler ran %d times; want twice (once per retention period)", n)
	}
}
