package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCancelRacingTheStartFiresNothingBeforeTheTake races, on every
// emulator, a keyed cancel of a pending webhook run against the
// executor's start of it from the runs stream (both released at once),
// the executor's writes under injected DynamoDB errors: its start applied
// with the answer lost (once, and then throttled past the SDK's retries)
// or throttled past the retries before it applies. Whatever wins, once the
// run is settled (the stale-run pass drives whatever is left live): it
// ends once, cancelled exactly when the cancel was answered without an
// error (by that cancel: CancelledBy), else completed; a run that ended
// cancelled before any execution took it (claim epoch 0) delivered
// nothing and logged no node event; a run taken before its cancel
// delivered at most once; a completed run delivered once.
func TestCancelRacingTheStartFiresNothingBeforeTheTake(t *testing.T) {
	plans := []struct {
		name string
		arm  func(f *dynamotest.Faults)
	}{
		{"no fault", func(*dynamotest.Faults) {}},
		{"start lost once", func(f *dynamotest.Faults) { f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost()) }},
		{"start lost then throttled", func(f *dynamotest.Faults) {
			f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			f.FailNext("UpdateItem", 2, dynamotest.Throttle())
		}},
		{"start throttled", func(f *dynamotest.Faults) { f.FailNext("UpdateItem", 3, dynamotest.Throttle()) }},
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rig := newFaultRig(t, e, nil)
		x, faults, store, clk := rig.x, rig.faults, rig.store, rig.clk
		const rounds = 8
		outcomes := map[string]int{}
		defer func() { t.Logf("outcomes: %v", outcomes) }()
		for round := range rounds * len(plans) {
			plan := plans[round%len(plans)]
			rc := newReceiver(t)
			in, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/hook", "payload": round})
			r := runs.NewRun("acme", webhook.WorkflowWebhook, in, clk.Now())
			if err := store.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			faults.Clear()
			plan.arm(faults)
			by := fmt.Sprintf("caller:v1:cancel-%d", round)
			var cancelErr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				x.HandleRecords(ctx, []stream.StreamRecord{insert(fmt.Sprint("e", round), r)})
			}()
			go func() {
				defer wg.Done()
				<-start
				_, cancelErr = store.Cancel(ctx, r.ID, []runs.Status{runs.StatusPending, runs.StatusRunning}, by, "", clk.Now())
			}()
			close(start)
			wg.Wait()
			faults.Clear()
			if cancelErr != nil && !errors.Is(cancelErr, runs.ErrStatusConflict) {
				t.Fatalf("%s: cancel: %v", plan.name, cancelErr)
			}
			got := getSettled(t, store, x, clk, r.ID)
			hits := len(rc.seen())
			outcomes[fmt.Sprintf("%s/epoch%d/hits%d", got.Status, min(got.Epoch, 1), hits)]++
			switch {
			case cancelErr == nil && (got.Status != runs.StatusCancelled || got.CancelledBy != by):
				t.Fatalf("%s: the cancel was answered 200 but the run is %s (by %q)", plan.name, got.Status, got.CancelledBy)
			case cancelErr != nil && got.Status != runs.StatusCompleted:
				t.Fatalf("%s: the cancel was refused but the run ended %s (%s)", plan.name, got.Status, got.Error)
			case got.Status == runs.StatusCancelled && got.Epoch == 0 && (hits != 0 || len(got.Log) != 0):
				t.Fatalf("%s: cancelled before its first take, yet %d deliveries and log %v", plan.name, hits, logTypes(got))
			case got.Status == runs.StatusCompleted && hits != 1:
				t.Fatalf("%s: completed with %d deliveries", plan.name, hits)
			case hits > 1:
				t.Fatalf("%s: %d deliveries", plan.name, hits)
			}
		}
	})
}

// getSettled reads run id once it is terminal: while it is live (an
// execution's record left for retry), the clock moves past the stale
// window and the stale-run pass drives it.
func getSettled(t *testing.T, d runs.RunStore, x *Executor, clk *clock, id string) runs.Run {
	t.Helper()
	for range 10 {
		got, err := d.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			return got
		}
		clk.Set(clk.Now().Add(time.Minute))
		if _, err := x.ResumeStale(context.Background()); err != nil {
			t.Logf("stale-run pass: %v", err)
		}
	}
	t.Fatalf("run %s still live after ten stale-run passes", id)
	return runs.Run{}
}

// TestCancelRacingTheResumeOfAParkedRun races, on every emulator, a keyed
// cancel of a parked webhook run that is due against the due pass's
// resume of it (ResumeDue), the pass's writes under the injected errors of
// TestCancelRacingTheStartFiresNothingBeforeTheTake; in odd rounds the
// cancel is released as the pass's resume write goes out. Once settled, the run
// ends once, cancelled exactly when the cancel was answered without an
// error; a run the cancel ended before the pass took it (its claim epoch
// still the park's) delivered nothing; none delivered more than once.
func TestCancelRacingTheResumeOfAParkedRun(t *testing.T) {
	plans := []func(f *dynamotest.Faults){
		func(*dynamotest.Faults) {},
		func(f *dynamotest.Faults) { f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost()) },
		func(f *dynamotest.Faults) {
			f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			f.FailNext("UpdateItem", 2, dynamotest.Throttle())
		},
		func(f *dynamotest.Faults) { f.FailNext("UpdateItem", 3, dynamotest.Throttle()) },
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		var xruns *resumeSignal
		rig := newFaultRig(t, e, func(d *runs.DynamoRuns) runs.RunStore { xruns = &resumeSignal{DynamoRuns: d}; return xruns })
		x, faults, store, clk := rig.x, rig.faults, rig.store, rig.clk
		outcomes := map[string]int{}
		defer func() { t.Logf("outcomes: %v; resume writes %d", outcomes, xruns.calls) }()
		for round := range 8 * len(plans) {
			rc := newReceiver(t)
			in, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/hook", "payload": round})
			r := runs.NewRun("acme", webhook.WorkflowWebhook, in, clk.Now())
			if err := store.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			r, err := store.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			if r, err = store.Park(ctx, r.ID, r.Epoch, runs.Wake{At: clk.Now().Add(time.Second), Attempt: 1, MaxAttempts: 5}, clk.Now()); err != nil {
				t.Fatal(err)
			}
			clk.Set(clk.Now().Add(2 * time.Second))
			faults.Clear()
			plans[round%len(plans)](faults)
			by := fmt.Sprintf("caller:v1:cancel-parked-%d", round)
			var cancelErr error
			var wg sync.WaitGroup
			start, resumed := make(chan struct{}), make(chan struct{})
			resuming := xruns.arm()
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer close(resumed)
				<-start
				_, _ = x.ResumeDue(ctx)
			}()
			go func() {
				defer wg.Done()
				<-start
				if round%2 == 1 {
					// Released as the pass's resume write goes out.
					select {
					case <-resuming:
					case <-resumed:
					}
				}
				_, cancelErr = store.Cancel(ctx, r.ID, []runs.Status{runs.StatusPending, runs.StatusRunning}, by, "", clk.Now())
			}()
			close(start)
			wg.Wait()
			faults.Clear()
			if cancelErr != nil && !errors.Is(cancelErr, runs.ErrStatusConflict) {
				t.Fatalf("round %d: cancel: %v", round, cancelErr)
			}
			got := getSettled(t, store, x, clk, r.ID)
			hits := len(rc.seen())
			outcomes[fmt.Sprintf("%s/taken%v/hits%d", got.Status, got.Epoch > r.Epoch, hits)]++
			switch {
			case cancelErr == nil && (got.Status != runs.StatusCancelled || got.CancelledBy != by):
				t.Fatalf("round %d: the cancel was answered 200 but the run is %s (by %q)", round, got.Status, got.CancelledBy)
			case cancelErr != nil && got.Status != runs.StatusCompleted:
				t.Fatalf("round %d: the cancel was refused but the run ended %s (%s)", round, got.Status, got.Error)
			case got.Status == runs.StatusCancelled && got.Epoch == r.Epoch && hits != 0:
				t.Fatalf("round %d: cancelled while parked, yet %d deliveries", round, hits)
			case hits > 1:
				t.Fatalf("round %d: %d deliveries", round, hits)
			}
		}
	})
}

// resumeSignal is a run store that closes the channel arm returned as a
// Resume is called, before its write goes out.
type resumeSignal struct {
	*runs.DynamoRuns
	mu    sync.Mutex
	ch    chan struct{}
	calls int
}

func (s *resumeSignal) arm() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ch = make(chan struct{})
	return s.ch
}

func (s *resumeSignal) Resume(ctx context.Context, id string, now time.Time) (runs.Run, error) {
	s.mu.Lock()
	s.calls++
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
	return s.DynamoRuns.Resume(ctx, id, now)
}
