package regionsim_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
)

// TestLayer1ForgottenClaimDoesNotDeleteTheOtherRegionsRun: under
// reconciled-records a key that created a run in eu is sent to us within
// the lag or during a partition, where it is refused with an answer the
// policy forgets (a 403, or a 409 run_already_active for a dedup scope
// that a run in us holds: the claim is deleted, "the request leaves
// nothing behind"). That claim and its deletion replicate to eu: the
// deletion is the newest write of the key, so the global table alone
// would delete eu's record in both regions, and the key's next retry
// would create a second run. eu's record names the key's only run: both
// regions end on it, and the key replays it in both and runs nothing
// again. Both orders (us's refusal before or after eu's run), and with
// the changes delivered twice and again in reverse order.
func TestLayer1ForgottenClaimDoesNotDeleteTheOtherRegionsRun(t *testing.T) {
	const run = "acme/aaaa-only-run-0123456789"
	for _, tc := range []struct {
		name      string
		usFirst   bool
		redeliver bool
	}{
		{"refused after the run", false, false},
		{"refused before the run", true, false},
		{"refused after the run/redelivered", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			w := newAudited(t, auditedConfig{redeliver: tc.redeliver, handler: func(r string) http.HandlerFunc {
				return func(rw http.ResponseWriter, _ *http.Request) {
					if r == us {
						rw.Header().Set("Content-Type", "application/json")
						rw.WriteHeader(http.StatusForbidden)
						_, _ = io.WriteString(rw, `{"error":"forbidden","message":"not here"}`)
						return
					}
					runs.Add(1)
					rw.Header().Set("Content-Type", "application/json")
					rw.WriteHeader(http.StatusCreated)
					_, _ = io.WriteString(rw, `{"runId":"`+run+`","status":"pending"}`)
				}
			}})
			w.rep.SetPartitioned(true)
			order := []string{eu, us}
			if tc.usFirst {
				order = []string{us, eu}
			}
			for _, r := range order {
				resp, b := w.post(r)
				if want := map[string]int{eu: http.StatusCreated, us: http.StatusForbidden}[r]; resp.StatusCode != want {
					t.Fatalf("%s: %d %s", r, resp.StatusCode, b)
				}
				w.step(10 * time.Millisecond)
			}
			w.heal(tc.redeliver)
			for _, r := range []string{eu, us} {
				if n := len(scanAll(t, w.p, r)); n != 1 {
					t.Fatalf("%s holds %d items; want the record of the key's run", r, n)
				}
				rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
				if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), run) {
					t.Fatalf("%s's replica holds %s (%v); want the record naming %s", r, body(&rec), err, run)
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
