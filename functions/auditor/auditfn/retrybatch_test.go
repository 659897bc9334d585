package auditfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
)

// failOnce fails the first restore of the records named in fail, then
// writes.
type failOnce struct {
	fail   map[string]bool // record pk -> fail its next restore
	writes int
}

func (f *failOnce) Restore(_ context.Context, winner, _ map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	pk := winner["pk"].(*types.AttributeValueMemberS).Value
	if f.fail[pk] {
		f.fail[pk] = false
		return false, nil, errors.New("throttled past the SDK's retries")
	}
	f.writes++
	return true, nil, nil
}

// A stream batch whose Layer-1 restore fails is delivered again, and the
// conflicts it recorded before must not be recorded again: the event
// source mapping redelivers from the record reported failed (partial batch
// response), the records before it are not audited again, and the failed
// record's conflict is recorded only once its restore is decided. Each
// conflict is then logged and counted once, and each restore written once,
// however the batch is retried. The event source mapping is simulated:
// a function error redelivers the whole batch; a batch item failure,
// from that item on.
func TestRetriedBatchRecordsEachConflictOnce(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	// Three Layer-1 conflicts, each a record naming the lower run
	// overwritten by the other region's record naming the higher one.
	var recs []events.DynamoDBEventRecord
	fail := map[string]bool{}
	for i := range 3 {
		id := keyspace.ID("tenant:acme", "POST /runs", "retried-batch-key-0123456789-"+strconv.Itoa(i))
		var imgs [2]map[string]types.AttributeValue
		for j, run := range []string{"acme/run-a", "acme/run-z"} {
			table, st := newIdemTable(t, e)
			req := fmt.Sprintf("req-%d-%d", i, j)
			res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
				LeaseExpires: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}, t0)
			if err != nil || res.Decision != idem.Claimed {
				t.Fatalf("claim: %+v %v", res, err)
			}
			if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
				Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + run + `"}`)}}, t0); err != nil {
				t.Fatal(err)
			}
			imgs[j] = scanOne(t, ctx, e, table)
		}
		recs = append(recs, events.DynamoDBEventRecord{EventName: "MODIFY", AWSRegion: "eu-west-1", Change: events.DynamoDBStreamRecord{
			Keys:     toLambdaMap(t, map[string]types.AttributeValue{"pk": imgs[1]["pk"]}),
			OldImage: toLambdaMap(t, imgs[0]), NewImage: toLambdaMap(t, imgs[1])}})
		if i == 1 {
			fail[id] = true // the middle record's restore fails once
		}
	}
	var mb, lb bytes.Buffer
	env := map[string]string{"CROSS_REGION": "reconciled-records", EnvRegion: "eu-west-1"}
	a, err := NewFromEnv(func(k string) string { return env[k] }, emf.New(&mb, "idemkit"), slog.New(slog.NewJSONHandler(&lb, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r := &failOnce{fail: fail}
	a.Restore, a.Now = r, func() time.Time { return t0 }

	deliver, rounds := recs, 0
	for ; len(deliver) > 0 && rounds < 5; rounds++ {
		resp, err := a.HandleLambda(ctx, lambdaEvent(t, deliver...))
		if err != nil {
			continue // a function error: the whole batch again
		}
		if len(resp.BatchItemFailures) == 0 {
			deliver = nil
			break
		}
		n, _ := strconv.Atoi(resp.BatchItemFailures[0].ItemIdentifier) // lambdaEvent numbers the records from 1
		if n < 1 || n > len(deliver) {
			t.Fatalf("batch item failure %q", resp.BatchItemFailures[0].ItemIdentifier)
		}
		deliver = deliver[n-1:]
	}
	if len(deliver) != 0 {
		t.Fatalf("the batch still failed after %d deliveries", rounds)
	}
	total := 0.0
	for _, l := range emfLines(t, mb.String(), conflictaudit.MetricConflicts) {
		total += l[conflictaudit.MetricConflicts].(float64)
	}
	events := conflictEvents(t, lb.String())
	if total != 3 || len(events) != 3 || r.writes != 3 {
		t.Fatalf("after %d deliveries: conflicts counted %v, logged %d, restores written %d; want 3 of each (one per conflict)",
			rounds+1, total, len(events), r.writes)
	}
	// The on-call sees both: the restore that failed (the invocation
	// succeeds, so the auditor-errors alarm does not) and each write-back.
	sum := func(name string) float64 {
		n := 0.0
		for _, l := range emfLines(t, mb.String(), name) {
			if l["table"] != TableIdempotency {
				t.Errorf("%s: table %v, want %s", name, l["table"], TableIdempotency)
			}
			n += l[name].(float64)
		}
		return n
	}
	if f, w := sum(MetricRestoreFailures), sum(MetricRestored); f != 1 || w != 3 {
		t.Fatalf("%s %v, %s %v; want 1 (the one failed restore) and 3 (one per write-back)", MetricRestoreFailures, f, MetricRestored, w)
	}
}

// conflictEvents are the Layer-1 conflict log lines in out.
func conflictEvents(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m["msg"] == "cross_region_conflict" && m["kind"] == conflictaudit.KindKey {
			evs = append(evs, m)
		}
	}
	return evs
}
