package runs_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// A run holds its tenant's scope while it is live: a second create of the
// scope is refused, another tenant's is not, and once the holder ends the
// scope is taken over.
func ExampleMemRuns_CreateScoped() {
	ctx := context.Background()
	st := runs.NewMemRuns()
	now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	first := runs.NewRun("acme", "conformance-noop", nil, now)
	fmt.Println(st.CreateScoped(ctx, first, "order-7"))
	err := st.CreateScoped(ctx, runs.NewRun("acme", "conformance-noop", nil, now), "order-7")
	fmt.Println(errors.Is(err, runs.ErrScopeHeld))
	fmt.Println(st.CreateScoped(ctx, runs.NewRun("globex", "conformance-noop", nil, now), "order-7"))
	if _, err := st.Transition(ctx, first.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", now); err != nil {
		fmt.Println(err)
	}
	fmt.Println(st.CreateScoped(ctx, runs.NewRun("acme", "conformance-noop", nil, now), "order-7"))
	// Output:
	// <nil>
	// true
	// <nil>
	// <nil>
}
