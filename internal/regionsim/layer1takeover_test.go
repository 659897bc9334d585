package regionsim_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestLayer1TakeoverAcrossRegionsConvergesOnLowestRunID: under
// reconciled-records a key can run in both regions through a takeover, not
// only through two first claims. eu claims the key and its handler is still
// running when its pending claim replicates to us; us, whose clock runs
// ahead of eu's by more than the lease (or which never saw eu's renewals,
// a partition), sees the lease ended and takes the claim over (attempt 2),
// runs the handler and records its run; eu's handler then records its own
// run in eu. A takeover keeps the first claim's request id, so the two
// records carry the same one. The claim of MULTI_REGION.md is the same as
// for two first claims: both regions converge on the lower run id and the
// auditor that saw the overwrite records a conflict event.
func TestLayer1TakeoverAcrossRegionsConvergesOnLowestRunID(t *testing.T) {
	for _, tc := range []struct {
		names     [2]string
		redeliver bool
	}{
		{[2]string{"acme/aaaa-first-0123456789", "acme/zzzz-second-012345678"}, false}, // eu's run lower
		{[2]string{"acme/zzzz-first-0123456789", "acme/aaaa-second-012345678"}, false}, // us's run lower
		{[2]string{"acme/aaaa-first-0123456789", "acme/zzzz-second-012345678"}, true},
		{[2]string{"acme/zzzz-first-0123456789", "acme/aaaa-second-012345678"}, true},
	} {
		names, name := tc.names, tc.names[0][5:9]+"-in-eu"
		if tc.redeliver {
			name += "/redelivered"
		}
		t.Run(name, func(t *testing.T) {
			low, high := names[0], names[1]
			if high < low {
				low, high = high, low
			}
			skew := map[string]time.Duration{eu: 0, us: 10 * time.Minute} // us ahead by twice the lease
			var runs atomic.Int32
			started, release := make(chan struct{}), make(chan struct{})
			var clock *ledgertest.Clock
			// With redelivery every change is audited twice as it happens
			// and all of them again, in reverse order, after healing (as in
			// TestLayer1PartitionConvergesOnLowestRunID).
			w := newAudited(t, auditedConfig{redeliver: tc.redeliver,
				guardClock: func(r string) idem.Clock {
					d := skew[r]
					return idemtest.ClockFuncs{NowFunc: func() time.Time { return clock.Now().Add(d) }}
				},
				handler: func(region string) http.HandlerFunc {
					return func(rw http.ResponseWriter, _ *http.Request) {
						runs.Add(1)
						run := names[1]
						if region == eu {
							run = names[0]
							close(started)
							<-release // still running while us takes the claim over
						}
						rw.Header().Set("Content-Type", "application/json")
						rw.WriteHeader(http.StatusCreated)
						_, _ = io.WriteString(rw, `{"runId":"`+run+`","status":"pending"}`)
					}
				}})
			p, rep, post := w.p, w.rep, w.post
			clock = w.clock

			euDone := make(chan string, 1)
			go func() {
				resp, b := post(eu)
				euDone <- resp.Status + " " + b
			}()
			<-started
			w.step(10 * time.Millisecond) // eu's pending claim observed
			clock.Advance(time.Second)
			w.step(10 * time.Millisecond) // and applied in us
			if n := len(scanAll(t, p, us)); n != 1 {
				t.Fatalf("us holds %d items; eu's pending claim should have replicated", n)
			}
			rep.SetPartitioned(true)
			if r, b := post(us); r.StatusCode != http.StatusCreated || !strings.Contains(b, names[1]) || r.Header.Get("OpenWOP-Idempotent-Replay") != "" {
				t.Fatalf("us, eu's lease ended on its clock: %d %s (want a takeover and a run of its own)", r.StatusCode, b)
			}
			w.step(10 * time.Millisecond) // us's takeover and completion observed
			close(release)
			if got := <-euDone; !strings.Contains(got, "201") || !strings.Contains(got, names[0]) {
				t.Fatalf("eu's first request: %s", got)
			}
			w.step(10 * time.Millisecond) // eu's completion observed, after us's
			w.heal(tc.redeliver)
			if runs.Load() != 2 {
				t.Fatalf("handler ran %d times, want 2 (once per region)", runs.Load())
			}
			for _, r := range []string{eu, us} {
				rec, err := idemdynamo.DecodeItem(onlyRecord(t, p, r))
				if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), low) {
					t.Errorf("%s's replica holds %s (%v); want the lower run %s's record", r, body(&rec), err, low)
				}
			}
			events, _ := w.events()
			if len(events) == 0 {
				t.Fatal("no Layer-1 conflict event for a key that created a run in each region")
			}
			if !tc.redeliver && len(events) != 1 {
				t.Fatalf("%d conflict events for one conflict; want 1 (TestLayer1ConflictIsRecordedOnce)", len(events))
			}
			for _, ev := range events {
				w, _ := ev["winner"].(map[string]any)
				l, _ := ev["loser"].(map[string]any)
				if w["run"] != low || l["run"] != high {
					t.Fatalf("conflict event %v; want winner %s, loser %s", ev, low, high)
				}
			}
		})
	}
}

func body(rec *idem.Record) string {
	if rec == nil || rec.Response == nil {
		return "no response"
	}
	return string(rec.Response.Body)
}
