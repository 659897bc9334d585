package apifn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDedupKeyRetryAfterLostCompletionWhileScopeRetaken: a keyed enforced
// create wrote its scope and its run, and died before its Layer-1
// completion (the run write is not part of the completion: memory and
// conditional DynamoDB writes). Its run ended, and another key's create
// took the scope over and is live. The first key's retry, after the
// lease, re-executes under the same run id: its run exists, so it answers
// that run's 201 (then replays it), never 409 run_already_active from the
// other run's hold, which the policy forgets and after which the key's
// next request would create a second run. Memory and every emulator.
func TestDedupKeyRetryAfterLostCompletionWhileScopeRetaken(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now())
		st := &lostCompletion{Store: inner}
		f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
		ctx := context.Background()
		k := dedupKey("lostcompletion", 0)

		r, m := f.do(t, enforced("acme", k, "order-21"))
		first, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || first == "" {
			t.Fatalf("the create that died before its completion: %d %s", r.StatusCode, r.Body)
		}
		if _, err := rs.Transition(ctx, first, []runs.Status{runs.StatusPending}, runs.StatusCompleted, "", clk.Now()); err != nil {
			t.Fatal(err)
		}
		r, m = f.do(t, enforced("acme", dedupKey("lostcompletion", 1), "order-21"))
		taker, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || taker == first {
			t.Fatalf("another key's create after the first run ended: %d %s", r.StatusCode, r.Body)
		}

		clk.Advance(idem.DefaultLease + time.Second)
		retry := enforced("acme", k, "order-21")
		retry.RequestContext.RequestID = "req-lostcompletion-retry"
		r, m = f.do(t, retry)
		if r.StatusCode != http.StatusCreated || m["runId"] != first {
			t.Fatalf("the first key's retry after its lost completion: %d %s, want 201 naming its run %s", r.StatusCode, r.Body, first)
		}
		if _, err := rs.Transition(ctx, taker, []runs.Status{runs.StatusPending}, runs.StatusCompleted, "", clk.Now()); err != nil {
			t.Fatal(err)
		}
		again := enforced("acme", k, "order-21")
		again.RequestContext.RequestID = "req-lostcompletion-again"
		if r2, m2 := f.do(t, again); r2.StatusCode != http.StatusCreated || m2["runId"] != first {
			t.Fatalf("the first key once the scope is free: %d %s, want the replay naming %s (one run per key)", r2.StatusCode, r2.Body, first)
		}
	})
}
