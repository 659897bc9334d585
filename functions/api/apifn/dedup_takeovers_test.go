package apifn

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestScopeParallelTakeoversOfAnUnwrittenHolder: through the API, a keyed
// enforced create took its scope and stopped before its run was written
// (its run write failed), so the scope names a run that does not exist.
// Past the hold's grace (and the claim's lease), many enforced creates of
// the scope under other keys arrive at once, with the first key's retry
// among them. Exactly one is answered 201 and its run is live and holds
// the scope; every other, the first key's retry included, is 409
// run_already_active with Retry-After, and each refused key's next
// request is 409 too; the run the 201 names
// exists, and once it ended the scope is taken again.
// On every engine, with the run committed by its own conditional write
// and in the completion transaction.
func TestScopeParallelTakeoversOfAnUnwrittenHolder(t *testing.T) {
	const racers = 8
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			ctx := context.Background()
			f, store, clk, faults := faultyHost(t, e, transactional)
			var q requestIDs
			enforced := func(key string) events.APIGatewayV2HTTPRequest { return q.enforced("acme", key, "order-77") }
			first := dedupKey("takeovers", 0)
			// The first execution: the claim and the scope's write land,
			// the run's write does not.
			interruptCreate(t, f, faults, transactional, enforced(first))

			clk.off.Store(int64(runs.ScopeHoldGrace + time.Minute))
			keys := []string{first}
			for i := 1; i < racers; i++ {
				keys = append(keys, dedupKey("takeovers", i))
			}
			answers := make([]events.APIGatewayV2HTTPResponse, len(keys))
			bodies := make([]map[string]any, len(keys))
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, k := range keys {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					answers[i], bodies[i] = f.do(t, enforced(k))
				}()
			}
			close(start)
			wg.Wait()

			winner := ""
			for i, r := range answers {
				switch r.StatusCode {
				case http.StatusCreated:
					id, _ := bodies[i]["runId"].(string)
					if winner != "" {
						t.Fatalf("two creates of one scope answered 201: %s and %s (key %d)", winner, id, i)
					}
					winner = id
				default:
					// The first key's retry too, where its create passed
					// every check and a takeover then fenced its run id
					// before its run's write: the conditional Put, or
					// the completion transaction, which the tombstone
					// cancels (TestDedupRetryFencedBeforeCompletion).
					wantHeld(t, "racer "+strconv.Itoa(i), r)
				}
			}
			if winner == "" {
				t.Fatal("no create took over the scope of a holder that was never written")
			}
			live, err := store.Get(ctx, winner)
			if err != nil || live.Status.Terminal() {
				t.Fatalf("the winner's run %s: %+v, %v", winner, live, err)
			}
			// Every refused key's next request is refused too (no key holds
			// a run beside the winner's), and the winner's key replays it.
			for i, k := range keys {
				r, m := f.do(t, enforced(k))
				if answers[i].StatusCode == http.StatusCreated {
					if id, _ := m["runId"].(string); r.StatusCode != http.StatusCreated || id != winner {
						t.Fatalf("the winner's key again: %d %s, want its 201 for %s", r.StatusCode, r.Body, winner)
					}
					continue
				}
				wantHeld(t, "refused key "+strconv.Itoa(i)+" again", r)
			}
			// Nothing is stuck: once the winner ended, a new key creates.
			if _, err := store.Transition(ctx, winner, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", clk.Now()); err != nil {
				t.Fatal(err)
			}
			r, m := f.do(t, enforced(dedupKey("takeovers", racers)))
			if r.StatusCode != http.StatusCreated {
				t.Fatalf("a create after the winner ended: %d %s", r.StatusCode, r.Body)
			}
			if id, _ := m["runId"].(string); id == "" {
				t.Fatal("201 without a runId")
			} else if _, err := store.Get(ctx, id); err != nil {
				t.Fatalf("the run a 201 named: %v", err)
			}
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}
