package dynamostore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCommerceSyncDuplicatePastItsBudgetGetsThePendingAction: a slow
// synchronous verb wrapped by a commerce Guard (the library path): a sync
// duplicate (no mode, or Idempotency-Mode: sync) of a request still
// executing when its wait budget ends — no budget at all (Wait -1), or a
// short one — is answered as the pending Action, as async is: 202 with
// Retry-After, Idempotent-Replayed: true and {"status": "pending",
// "requestId": <the first request's id>}, never 409 idempotency_in_flight;
// the verb runs once, and after it finishes the key replays its answer. On
// every engine.
func TestCommerceSyncDuplicatePastItsBudgetGetsThePendingAction(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, wait := range []time.Duration{-1, 30 * time.Millisecond} {
			v := setup(t, e)
			clk := clock.NewManual(v.now)
			g := commerceGuard(t, v.s, clk, func(c *idem.Config) { c.Wait = wait })
			h := newBlocking()
			w := g.HTTPAPI(h.serve)
			key := cartKey()
			firstEv := commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)
			first := make(chan events.APIGatewayV2HTTPResponse, 1)
			go func() { first <- call(t, w, firstEv) }()
			<-h.entered // the verb is executing, and stays so until released
			for _, mode := range []string{"", "sync", "async"} {
				ev := commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)
				if mode != "" {
					ev.Headers[commerce.HeaderMode] = mode
				}
				r := call(t, w, ev)
				var m map[string]any
				_ = json.Unmarshal([]byte(r.Body), &m)
				if r.StatusCode != 202 || r.Headers[idem.HeaderRetryAfter] == "" || r.Headers[commerce.HeaderIdempotentReplay] != "true" ||
					m["status"] != "pending" || m["requestId"] != firstEv.RequestContext.RequestID {
					t.Fatalf("wait %v, mode %q, the first still executing: %d %v %s; want 202, the pending Action with Retry-After", wait, mode, r.StatusCode, r.Headers, r.Body)
				}
			}
			close(h.release)
			if r := <-first; r.StatusCode != 201 {
				t.Fatalf("first: %d %s", r.StatusCode, r.Body)
			}
			if r := call(t, w, commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)); r.StatusCode != 201 || r.Headers[commerce.HeaderIdempotentReplay] != "true" {
				t.Fatalf("after the first finished: %d %v %s, want its answer replayed", r.StatusCode, r.Headers, r.Body)
			}
			if n := h.runs.Load(); n != 1 {
				t.Fatalf("the verb ran %d times, want 1", n)
			}
		}
	})
}
