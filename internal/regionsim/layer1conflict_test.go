package regionsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/ledgertest"
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
			p := newPair(t, "IdempotencyTable")
			clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
			var runs atomic.Int32
			srv := map[string]*httptest.Server{}
			var logs bytes.Buffer
			var mu sync.Mutex
			auditors := map[string]*auditfn.Auditor{}
			for _, r := range []string{eu, us} {
				st, err := idemdynamo.New(idemdynamo.Config{Client: p.db(r), Table: p.tables[r]})
				if err != nil {
					t.Fatal(err)
				}
				g, err := idem.New(idem.Config{Store: st, HTTPTenant: func(*http.Request) (string, bool) { return "acme", true },
					Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				mux := http.NewServeMux()
				mux.Handle("POST /runs", g.Middleware(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
					n := runs.Add(1)
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(rw, `{"runId":"`+tc.names[n-1]+`","status":"pending"}`)
				})))
				srv[r] = httptest.NewServer(mux)
				t.Cleanup(srv[r].Close)
				ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: r,
					Log: slog.New(slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &logs}, nil))})
				if err != nil {
					t.Fatal(err)
				}
				auditors[r] = &auditfn.Auditor{Conflicts: ca, Now: clock.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
					Restore: auditfn.TableRestorer{Client: p.db(r), Table: p.tables[r]}}
			}
			var auditErr error
			var seen []regionsim.Change
			audit := func(c regionsim.Change) {
				cnt := auditors[c.Region].Audit(ctx(t), []stream.StreamRecord{{EventName: c.Event, Keys: c.Keys, OldImage: c.Old, NewImage: c.New}})
				if cnt.RestoreErr != nil {
					auditErr = cnt.RestoreErr
				}
			}
			rep, err := regionsim.New(regionsim.Config{A: p.region(eu), B: p.region(us), Lag: time.Second, Now: clock.Now,
				OnChange: func(c regionsim.Change) {
					audit(c)
					if tc.redeliver {
						audit(c)
						seen = append(seen, c)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			post := func(r string) (*http.Response, string) {
				req, _ := http.NewRequest(http.MethodPost, srv[r].URL+"/runs", strings.NewReader(`{"workflow":"w1"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(idem.HeaderKey, key1)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp, string(b)
			}

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
			for range 3 { // heal, then let any restore replicate
				clock.Advance(2 * time.Second)
				if err := rep.Sync(ctx(t)); err != nil {
					t.Fatal(err)
				}
			}
			if tc.redeliver {
				if len(seen) < 2 {
					t.Fatalf("%d stream changes seen; the redelivery needs the conflict's", len(seen))
				}
				for i := len(seen) - 1; i >= 0; i-- {
					audit(seen[i])
				}
				for range 3 {
					clock.Advance(2 * time.Second)
					if err := rep.Sync(ctx(t)); err != nil {
						t.Fatal(err)
					}
				}
			}
			if auditErr != nil {
				t.Fatal(auditErr)
			}
			for _, r := range []string{eu, us} {
				resp, b := post(r)
				if resp.Header.Get("OpenWOP-Idempotent-Replay") != "true" || !strings.Contains(b, low) {
					t.Fatalf("%s after healing: %d %s replay=%q; want the lower run %s replayed", r, resp.StatusCode, b,
						resp.Header.Get("OpenWOP-Idempotent-Replay"), low)
				}
				rec, err := idemdynamo.DecodeItem(onlyRecord(t, p, r))
				if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), low) {
					t.Fatalf("%s's replica holds %+v, %v; want the lower run's record", r, rec, err)
				}
			}
			if runs.Load() != 2 {
				t.Fatalf("handler ran %d times, want 2 (once per region during the partition)", runs.Load())
			}
			mu.Lock()
			events := conflictEvents(t, logs.String())
			mu.Unlock()
			if len(events) == 0 {
				t.Fatal("no Layer-1 conflict event")
			}
			for _, ev := range events {
				w, _ := ev["winner"].(map[string]any)
				l, _ := ev["loser"].(map[string]any)
				if ev["kind"] != conflictaudit.KindKey || ev["strategy"] != string(fence.ReconciledRecords) || ev["resolution"] != conflictaudit.PartitionRecoveryLexMin ||
					w["run"] != low || l["run"] != high || ev["record"] == "" || strings.Contains(logs.String(), key1) || strings.Contains(logs.String(), `"status"`) {
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

// conflictEvents are the Layer-1 conflict log lines in out.
func conflictEvents(t *testing.T, out string) []map[string]any {
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

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
