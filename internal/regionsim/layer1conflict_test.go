package regionsim_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
)

// TestLayer1PartitionConvergesOnLowestRunID: under reconciled-records one
// Idempotency-Key sent to both regions during a partition creates two runs,
// one per region. On healing the record converges on the lexicographically
// lowest run id in both regions — whichever write replication ordered last
// (the lower run written first, so replication alone would keep the higher
// one; or written second) — and the conflict auditor of the region that saw
// the overwrite emits a conflict event: winner and loser run ids, strategy
// reconciled-records, the rule lexicographic-min-run-id, the record only as
// an opaque hash, no content. After convergence both regions replay the
// lower run's answer and nothing runs again.
//
// With redelivery, every stream change is audited twice as it happens (a
// batch retried) and, after healing, every change seen is delivered again
// in reverse order (a stale, out-of-order redelivery): the restores stay
// conditional on the record they saw, so the regions still converge on the
// lower run.
func TestLayer1PartitionConvergesOnLowestRunID(t *testing.T) {
	type order struct {
		name  string
		names [2]string // the runs the first (eu) and the second (us) request create
	}
	var cases []struct {
		order
		redeliver bool
	}
	for _, o := range []order{
		{"lower run written first", [2]string{"acme/aaaa-first-0123456789", "acme/zzzz-second-012345678"}},
		{"lower run written second", [2]string{"acme/zzzz-first-0123456789", "acme/aaaa-second-012345678"}},
	} {
		for _, rd := range []bool{false, true} {
			cases = append(cases, struct {
				order
				redeliver bool
			}{o, rd})
		}
	}
	for _, tc := range cases {
		name := tc.name
		if tc.redeliver {
			name += "/redelivered"
		}
		t.Run(name, func(t *testing.T) {
			low, high := tc.names[0], tc.names[1]
			if high < low {
				low, high = high, low
			}
			var runs atomic.Int32
			w := newAudited(t, auditedConfig{redeliver: tc.redeliver, handler: func(string) http.HandlerFunc {
				return func(rw http.ResponseWriter, _ *http.Request) {
					n := runs.Add(1)
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(rw, `{"runId":"`+tc.names[n-1]+`","status":"pending"}`)
				}
			}})
			rep, clock, post := w.rep, w.clock, w.post

			rep.SetPartitioned(true)
			if r, b := post(eu); r.StatusCode != http.StatusCreated || !strings.Contains(b, tc.names[0]) {
				t.Fatalf("eu: %d %s", r.StatusCode, b)
			}
			if _, err := rep.Step(ctx(t)); err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Millisecond)
			if r, b := post(us); r.StatusCode != http.StatusCreated || !strings.Contains(b, tc.names[1]) {
				t.Fatalf("us during the partition: %d %s (want a second, local run)", r.StatusCode, b)
			}
			if _, err := rep.Step(ctx(t)); err != nil {
				t.Fatal(err)
			}
			rep.SetPartitioned(false)
			w.sync()
			if tc.redeliver {
				if len(w.seen) < 2 {
					t.Fatalf("%d stream changes seen; the redelivery needs the conflict's", len(w.seen))
				}
				w.redeliverSeen()
				w.sync()
			}
			if w.auditErr != nil {
				t.Fatal(w.auditErr)
			}
			for _, r := range []string{eu, us} {
				resp, b := post(r)
				if resp.Header.Get("OpenWOP-Idempotent-Replay") != "true" || !strings.Contains(b, low) {
					t.Fatalf("%s after healing: %d %s replay=%q; want the lower run %s replayed", r, resp.StatusCode, b,
						resp.Header.Get("OpenWOP-Idempotent-Replay"), low)
				}
				rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
				if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), low) {
					t.Fatalf("%s's replica holds %+v, %v; want the lower run's record", r, rec, err)
				}
			}
			if runs.Load() != 2 {
				t.Fatalf("handler ran %d times, want 2 (once per region during the partition)", runs.Load())
			}
			events, logs := w.events()
			if len(events) == 0 {
				t.Fatal("no Layer-1 conflict event")
			}
			for _, ev := range events {
				w, _ := ev["winner"].(map[string]any)
				l, _ := ev["loser"].(map[string]any)
				if ev["kind"] != conflictaudit.KindKey || ev["strategy"] != string(fence.ReconciledRecords) || ev["resolution"] != conflictaudit.PartitionRecoveryLexMin ||
					w["run"] != low || l["run"] != high || ev["record"] == "" || strings.Contains(logs, key1) || strings.Contains(logs, `"status"`) {
					t.Fatalf("conflict event %v", ev)
				}
			}
		})
	}
}

// onlyRecord returns the one Layer-1 record item in region r's replica.
func onlyRecord(t *testing.T, p *pair, r string) map[string]types.AttributeValue {
	t.Helper()
	var out map[string]types.AttributeValue
	for _, it := range scanAll(t, p, r) {
		if _, err := idemdynamo.DecodeItem(it); err == nil {
			if out != nil {
				t.Fatalf("%s holds more than one record", r)
			}
			out = it
		}
	}
	if out == nil {
		t.Fatalf("%s holds no record", r)
	}
	return out
}

func scanAll(t *testing.T, p *pair, r string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := p.db(r).Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(p.tables[r]), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}
