package runs

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestScopedCreateCost pins what an enforced create of a free scope costs
// outside a Layer-1 claim, in DynamoDB calls and in write units computed
// from item sizes under both readings of AWS's rule (dynamotest.Meter): the
// scope's conditional PutItem and the run's conditional PutItem, one write
// unit each (both items are within 1 KB), on every engine and whether the
// store is Transactional or not: one PutItem and one write unit more than
// a create without a scope. The run's Put needs no transaction: a takeover
// fences a holder's run id with a tombstone before it takes the scope, so
// the run's own condition (no item at its id) is what keeps a create whose
// scope was taken over from writing its run (TestScopeUnwrittenHolder,
// TestScopeTakeoverRacesSlowHolder).
func TestScopedCreateCost(t *testing.T) {
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		ctx := context.Background()
		m := dynamotest.NewMeter(e.Client(), runAttrPK)
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, m.Middleware()), Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

		m.Take()
		if err := d.Create(ctx, scopeTestRun(t0)); err != nil {
			t.Fatal(err)
		}
		plain := m.Take()
		if err := d.CreateScoped(ctx, scopeTestRun(t0), "free"); err != nil {
			t.Fatal(err)
		}
		scoped := m.Take()
		t.Logf("create: %v calls, %d/%d WCU; enforced create of a free scope: %v calls, %d/%d WCU (existing/larger)",
			plain.Calls, plain.WriteExisting, plain.WriteLarger, scoped.Calls, scoped.WriteExisting, scoped.WriteLarger)
		if want := map[string]int{"PutItem": 1}; !maps.Equal(plain.Calls, want) || plain.WriteExisting != 1 || plain.WriteLarger != 1 {
			t.Errorf("a create: %v calls, %d/%d WCU, want %v and 1 WCU", plain.Calls, plain.WriteExisting, plain.WriteLarger, want)
		}
		if want := map[string]int{"PutItem": 2}; !maps.Equal(scoped.Calls, want) || scoped.WriteExisting != 2 || scoped.WriteLarger != 2 || scoped.Read != 0 {
			t.Errorf("an enforced create of a free scope: %v calls, %d/%d WCU, %d RCU, want %v, 2 WCU (the scope's write and the run's) and no read",
				scoped.Calls, scoped.WriteExisting, scoped.WriteLarger, scoped.Read, want)
		}
	})
}
