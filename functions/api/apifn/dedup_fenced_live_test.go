package apifn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDedupFencedKeyRetryWhileTakerLive: as TestDedupFencedKeyRetry, but
// the run that took the scope over (fencing the first key's run id with a
// tombstone) is still live when the first key re-executes. The
// re-execution reads its run id first (a re-execution whose run is
// written answers that run whoever holds the scope): a tombstone there is
// not its run, so it is refused 409 run_already_active, never 201 for a
// run that does not hold the scope while another live run does, and
// nothing is written at its run id. Once the taker ended, the key's next
// request creates one run, which holds the scope. On every engine, with
// the run committed by its own conditional write and in the completion
// transaction. (The memory store takes the scope and writes the run
// under one lock, so it has no interrupted create to fence.)
func TestDedupFencedKeyRetryWhileTakerLive(t *testing.T) {
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			ctx := context.Background()
			f, store, clk, faults := faultyHost(t, e, transactional)
			k := dedupKey("fencedlive", 0)
			// Each request has its own API Gateway request id, as a
			// client's retries do.
			var q requestIDs
			enforced := q.enforced
			// The first execution: the claim and the scope's write land,
			// the run's write does not.
			interruptCreate(t, f, faults, transactional, enforced("acme", k, "order-19"))
			// Past the grace (and the first claim's lease), another key
			// takes the scope over, fencing the first key's run id; its
			// run stays live.
			clk.off.Store(int64(runs.ScopeHoldGrace + time.Minute))
			r, m := f.do(t, enforced("acme", dedupKey("fencedlive", 1), "order-19"))
			if r.StatusCode != http.StatusCreated {
				t.Fatalf("the takeover: %d %s", r.StatusCode, r.Body)
			}
			taker, _ := m["runId"].(string)
			// The first key's re-execution, several times: each refused,
			// none answered 201.
			for i := 0; i < 2; i++ {
				r, m = f.do(t, enforced("acme", k, "order-19"))
				if r.StatusCode == http.StatusCreated {
					t.Fatalf("the fenced key's retry %d answered 201 (run %v) while %s, live, holds the scope", i, m["runId"], taker)
				}
				wantHeld(t, "the fenced key's retry", r)
			}
			if got, err := store.Get(ctx, taker); err != nil || got.Status.Terminal() {
				t.Fatalf("the taker after the retries: %+v %v", got, err)
			}
			// The taker ends: the key's next request creates its run,
			// once, and it holds the scope.
			if _, err := store.Transition(ctx, taker, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", clk.Now()); err != nil {
				t.Fatal(err)
			}
			r, m = f.do(t, enforced("acme", k, "order-19"))
			if r.StatusCode != http.StatusCreated {
				t.Fatalf("the key after the taker ended: %d %s", r.StatusCode, r.Body)
			}
			own, _ := m["runId"].(string)
			if own == "" || own == taker {
				t.Fatalf("the key's run: %q (taker %s)", own, taker)
			}
			if got, err := store.Get(ctx, own); err != nil || got.Status.Terminal() {
				t.Fatalf("the key's run: %+v %v", got, err)
			}
			if r2, m2 := f.do(t, enforced("acme", k, "order-19")); r2.StatusCode != http.StatusCreated || m2["runId"] != own {
				t.Fatalf("the key's replay: %d %s, want 201 for %s", r2.StatusCode, r2.Body, own)
			}
			wantHeld(t, "a third key", func() events.APIGatewayV2HTTPResponse {
				r, _ := f.do(t, enforced("acme", dedupKey("fencedlive", 2), "order-19"))
				return r
			}())
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}
