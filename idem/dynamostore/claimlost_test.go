package dynamostore_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestGuardClaimWhoseAnswersWereLostIsGivenBack: on every engine, a claim
// whose write landed but whose every answer was lost (the SDK's attempts
// all fail after the first one wrote the item) is answered 503
// idemkit.store_unavailable, and the Guard gives the claim back (a
// release conditional on its own owner token, which nobody else holds):
// the caller's retry, at once, runs the handler instead of meeting 409
// idempotency_in_flight until the lease ends. A claim that never landed
// (throttled on every attempt) has nothing to give back: the release
// fails its condition, writes nothing, and the retry runs. Either way the
// handler runs once, and the key's next request is its replay.
func TestGuardClaimWhoseAnswersWereLostIsGivenBack(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		for _, c := range []struct {
			name   string
			inject func()
		}{
			{"LandedEveryAnswerLost", func() { v.f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost()) }},
			{"ThrottledNeverLanded", func() { v.f.FailNext("PutItem", 3, dynamotest.Throttle()) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				m := &testutil.Counts{}
				g := unavailableGuard(t, v.s, m)
				h := &countingHandler{}
				ev := guardEvent(newKey(), `{"a":1}`)
				c.inject()
				want503(t, call(t, g.HTTPAPI(h.serve), ev))
				if v.f.Pending() != 0 || h.runs.Load() != 0 {
					t.Fatalf("faults pending %d, handler ran %d times", v.f.Pending(), h.runs.Load())
				}
				r := call(t, g.HTTPAPI(h.serve), ev)
				if r.StatusCode != 201 || r.Body != `{"execution":1}` || replayed(r.Headers) {
					t.Fatalf("the retry at once: %d %v %s; want the handler run", r.StatusCode, r.Headers, r.Body)
				}
				r = call(t, g.HTTPAPI(h.serve), ev)
				if r.StatusCode != 201 || r.Body != `{"execution":1}` || !replayed(r.Headers) || h.runs.Load() != 1 {
					t.Fatalf("the next: %d %v %s (runs %d); want the replay", r.StatusCode, r.Headers, r.Body, h.runs.Load())
				}
				if n := m.Get(idem.MetricStoreUnavailable); n != 1 {
					t.Fatalf("%s counted %v times, want 1", idem.MetricStoreUnavailable, n)
				}
			})
		}
	})
}
