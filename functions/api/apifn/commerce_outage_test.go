package apifn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCommerceStoreOutageIsNotReplayed: under the commerce policy, which
// replays a failed action's 5xx, the host's 503 idemkit.store_unavailable
// (a run store out of reach while the request ran) is not a failed
// action: it is never recorded as final, so the same key, once the store
// is back, runs again and gets its real answer, as its Retry-After and
// message say. A retry whose new run was written before the outage hit
// its link to the failed run finds that run again: one new run, listed
// once among the failed run's retries. The cancel in memory; the retry
// on every emulator (the run written by its own conditional write).
func TestCommerceStoreOutageIsNotReplayed(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		rs := &throttledRuns{MemRuns: runs.NewMemRuns()}
		f := hostOf(t, rs, idem.Config{Policy: commerce.Policy}, nil)
		f.runs = rs.MemRuns
		r := f.newRun(t, "acme")
		path := "/runs/" + runs.ProjectID(r.ID) + "/cancel"
		rs.down = true
		resp, m := f.do(t, commerceReq("POST", path, "cancel during the outage"))
		if resp.StatusCode != http.StatusServiceUnavailable || m["error"] != idem.CodeStoreUnavailable {
			t.Fatalf("cancel while the run store is throttled: %d %s", resp.StatusCode, resp.Body)
		}
		rs.down = false
		resp, m = f.do(t, commerceReq("POST", path, "cancel during the outage"))
		if resp.StatusCode != http.StatusOK || m["status"] != "cancelled" || resp.Headers["Idempotent-Replayed"] != "" {
			t.Fatalf("the same key once the store is back: %d %s %v, want the cancel's 200 (not the outage's 503 replayed)", resp.StatusCode, resp.Body, resp.Headers)
		}
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, faults.Middleware())
		rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		// The Guard's clock moves when it sleeps: the replay below waits
		// out its sync budget on it, not on the wall clock (5 s each).
		gc := idem.Config{Policy: commerce.Policy, Store: st, Test: idem.TestConfig{Clock: clock.NewManual(time.Now()).SleepAdvances()}}
		ch := &commerceHost{f: hostOf(t, rs, gc, nil), runs: rs}
		failed := ch.run(t, runs.StatusFailed)
		path := "/runs/" + runs.ProjectID(failed.ID) + "/retry"
		const key = "retry during the outage"
		// The claim and the new run's write land; listing the run among
		// the failed run's retries is throttled past the SDK's retries.
		faults.FailNext("UpdateItem", 3, dynamotest.Throttle()) // every SDK attempt (FastRetries)
		resp, m := ch.f.do(t, commerceReq("POST", path, key))
		faults.Clear()
		if resp.StatusCode != http.StatusServiceUnavailable || m["error"] != idem.CodeStoreUnavailable {
			t.Fatalf("retry while the link is throttled: %d %s", resp.StatusCode, resp.Body)
		}
		resp, m = ch.f.do(t, commerceReq("POST", path, key))
		newID, _ := m["runId"].(string)
		if resp.StatusCode != http.StatusCreated || newID == "" || m["retryOf"] != failed.ID {
			t.Fatalf("the same key once the store is back: %d %s %v, want the retry's 201 (not the outage's 503 replayed)", resp.StatusCode, resp.Body, resp.Headers)
		}
		if got := ch.get(t, failed.ID); len(got.Retries) != 1 || got.Retries[0] != newID {
			t.Fatalf("the failed run's retries: %v, want [%s]", got.Retries, newID)
		}
		if got, err := rs.Get(ctx, newID); err != nil || got.RetryOf != failed.ID {
			t.Fatalf("the new run: %+v %v", got, err)
		}
		// The key binds the Action (the new run), which nothing executes
		// here: its replay waits out the sync budget and answers the run
		// as it is now, still pending, 202 with Retry-After.
		again, m2 := ch.f.do(t, commerceReq("POST", path, key))
		if again.StatusCode != http.StatusAccepted || again.Headers["Retry-After"] == "" ||
			again.Headers["Idempotent-Replayed"] != "true" || m2["runId"] != newID || m2["status"] != "pending" {
			t.Fatalf("the key's replay: %d %s %v", again.StatusCode, again.Body, again.Headers)
		}
	})
}
