package regionsim_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
)

// TestLayer1AnswerNamingNoRunDoesNotReplaceTheOtherRegionsRun: under
// reconciled-records a key is claimed in us, whose handler is still
// running when the same key creates a run in eu (within the lag or during
// a partition); us's handler then ends with an answer naming no run: a
// 503 (the claim released, to be retried), a 404 (kept), a 403 (the claim
// forgotten: deleted). us's claim is older than eu's record, so
// replication discards it in eu, and what reaches eu is its end alone,
// the key's newest write: the global table alone would leave both regions
// without the record of the key's run, and the key's next request would
// create a second one. eu's record is the key's only run: both regions end
// on it, replay it, and the run is created once. With redelivery every
// change is audited twice as it happens and all of them again, in reverse
// order, after healing.
func TestLayer1AnswerNamingNoRunDoesNotReplaceTheOtherRegionsRun(t *testing.T) {
	const run = "acme/aaaa-only-run-0123456789"
	for _, tc := range []struct {
		status    int
		redeliver bool
	}{
		{http.StatusServiceUnavailable, false}, {http.StatusNotFound, false}, {http.StatusForbidden, false},
		{http.StatusServiceUnavailable, true}, {http.StatusNotFound, true}, {http.StatusForbidden, true},
	} {
		status, name := tc.status, strconv.Itoa(tc.status)
		if tc.redeliver {
			name += "/redelivered"
		}
		t.Run(name, func(t *testing.T) {
			var runs atomic.Int32
			started, release := make(chan struct{}), make(chan struct{})
			w := newAudited(t, auditedConfig{redeliver: tc.redeliver, handler: func(r string) http.HandlerFunc {
				return func(rw http.ResponseWriter, _ *http.Request) {
					rw.Header().Set("Content-Type", "application/json")
					if r == us {
						close(started)
						<-release
						rw.WriteHeader(status)
						_, _ = io.WriteString(rw, `{"error":"not_here","message":"not here"}`)
						return
					}
					runs.Add(1)
					rw.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(rw, `{"runId":"`+run+`","status":"pending"}`)
				}
			}})
			w.rep.SetPartitioned(true)
			usDone := make(chan int, 1)
			go func() {
				resp, _ := w.post(us)
				usDone <- resp.StatusCode
			}()
			<-started
			w.step(10 * time.Millisecond) // us's claim observed first
			if resp, b := w.post(eu); resp.StatusCode != http.StatusCreated {
				t.Fatalf("eu: %d %s", resp.StatusCode, b)
			}
			w.step(10 * time.Millisecond) // then eu's run
			close(release)
			if got := <-usDone; got != status {
				t.Fatalf("us answered %d; want %d", got, status)
			}
			w.step(10 * time.Millisecond) // then us's end, the key's newest write
			w.heal(tc.redeliver)
			for _, r := range []string{eu, us} {
				if n := len(scanAll(t, w.p, r)); n != 1 {
					t.Fatalf("%s holds %d items; want the record of the key's run", r, n)
				}
				rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
				if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), run) {
					t.Fatalf("%s's replica holds %s %s (%v); want the record naming %s", r, rec.State, body(&rec), err, run)
				}
				if resp, b := w.post(r); resp.Header.Get("OpenWOP-Idempotent-Replay") != "true" || !strings.Contains(b, run) {
					t.Fatalf("%s: the key again: %d %s; want a replay of %s", r, resp.StatusCode, b, run)
				}
			}
			if runs.Load() != 1 {
				t.Fatalf("the run-creating handler ran %d times; want once", runs.Load())
			}
		})
	}
}
