package apifn

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRetryKeyRunAgainWhoseRunIsWrittenCost: without transactions, a
// retry key whose first execution listed and wrote its run (answered 201)
// and lost its Layer-1 completion runs again past the lease and is
// answered 201 with the same run, at the cost in the runs table of the
// read of the failed run, the capped listing (granted: the id is listed)
// and the refused PutItem, which returns the run it found (ALL_OLD); on
// an engine that returns no item there (DynamoDB Local, dynalite), one
// read of that run more: 3 round trips, or 4. It was 6 on every engine:
// Create read the run to tell a stranger's id from this retry's, and the
// handler read it again and listed it again. The failed run lists the id
// once and one run retries it. On every engine.
func TestRetryKeyRunAgainWhoseRunIsWrittenCost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		const tenant = "acme"
		cnt := dynamotest.NewCounter()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		_, inner := dynamoStores(t, e, e.Client(dynamotest.FastRetries), false)
		clk := clock.NewManual(time.Now().UTC().Truncate(time.Millisecond))
		f := hostOf(t, rs, idem.Config{Store: firstAttemptsLost{inner}, Test: idem.TestConfig{Clock: clk}},
			func(_ *fixture, c *Config) { c.Test.Clock = clk })
		failed := runs.NewRun(tenant, "conformance-noop", nil, clk.Now())
		if err := rs.Create(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", clk.Now()); err != nil {
			t.Fatal(err)
		}
		req := ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "k-retry-again-0123456789abcdef", "")
		first, m := f.do(t, req)
		id, _ := m["runId"].(string)
		if first.StatusCode != http.StatusCreated || id == "" {
			t.Fatalf("the key's first execution: %d %s", first.StatusCode, first.Body)
		}

		clk.Advance(idem.DefaultLease + time.Second)
		cnt.Reset()
		again, m := f.do(t, req)
		if again.StatusCode != http.StatusCreated || m["runId"] != id {
			t.Fatalf("the key run again, its completion lost: %d %s; want 201 naming %s", again.StatusCode, again.Body, id)
		}
		want := map[string]int{"GetItem": 1, "UpdateItem": 1, "PutItem": 1}
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			want["GetItem"] = 2
		}
		if got := cnt.Ops(); !maps.Equal(got, want) {
			t.Fatalf("the key run again cost %v in the runs table; want %v (ALL_OLD returned: %v)", got, want, e.Caps.ReturnValuesOnConditionCheckFailure)
		}
		got, err := rs.Get(ctx, failed.ID)
		if err != nil || !slices.Equal(got.Retries, []string{id}) {
			t.Fatalf("the failed run lists %v (%v); want the key's run alone", got.Retries, err)
		}
	})
}
