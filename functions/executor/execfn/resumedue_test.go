package execfn

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// A parked run that a due pass resumed is no longer due: the next pass
// (every minute; every few seconds in idemkit dev) finds nothing to do
// while the first pass's execution is under way, instead of adopting the
// run again, fencing that execution and running its open node from the
// start. Passes arriving faster than the node took could otherwise keep
// the run from ever ending, with no failure ever counted.
func TestDuePassDoesNotTakeARunAnotherPassResumed(t *testing.T) {
	f := newFixture(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var holds atomic.Int32
	f.x.Test.Clock = ledgertest.ClockFuncs{SleepFunc: func(ctx context.Context, _ time.Duration) error {
		if holds.Add(1) == 1 {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	in, _ := json.Marshal(map[string]any{"delayMs": 600})
	r := hostruns.NewRun("acme", webhook.WorkflowCancellable, in, time.Now())
	ctx := context.Background()
	if err := f.runs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	// Started, then parked until its next attempt, which is due now.
	if _, err := f.runs.Transition(ctx, r.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.runs.Schedule(ctx, r.ID, hostruns.Wake{At: time.Now().Add(-time.Second), Attempt: 1, MaxAttempts: 3}, time.Now()); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() {
		_, err := f.x.ResumeDue(ctx)
		first <- err
	}()
	<-entered // the first pass is inside the run's open node
	n, err := f.x.ResumeDue(ctx)
	if err != nil || n != 0 {
		t.Errorf("the second pass executed %d runs (%v); want none: the run is being resumed", n, err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first pass: %v", err)
	}
	end, err := f.runs.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if end.Status != hostruns.StatusCompleted || holds.Load() != 1 {
		t.Fatalf("run %s, its open node entered %d times; want completed, once", end.Status, holds.Load())
	}
	if !end.Wake.IsZero() {
		t.Fatalf("the completed run is still parked: %+v", end.Wake)
	}
}
