package execfn

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// restoreFails fails the first append of workflow.restored transiently,
// as a throttled write does; every other call reaches the store.
type restoreFails struct {
	logStore
	mu     sync.Mutex
	failed int
}

func (s *restoreFails) AppendLog(ctx context.Context, id string, f runs.Fence, evs []runs.LogEvent, now time.Time) (runs.Run, error) {
	s.mu.Lock()
	fail := s.failed == 0 && len(evs) > 0 && evs[0].Type == EventWorkflowRestored
	if fail {
		s.failed++
	}
	s.mu.Unlock()
	if fail {
		return runs.Run{}, errors.New("host: append run log: ProvisionedThroughputExceededException")
	}
	return s.logStore.AppendLog(ctx, id, f, evs, now)
}

// secondGetFails fails the second Get transiently: under
// TestConfig.Booted, the read before an adoption (Execute's own read is
// the first).
type secondGetFails struct {
	logStore
	mu    sync.Mutex
	calls int
}

func (s *secondGetFails) Get(ctx context.Context, id string) (runs.Run, error) {
	s.mu.Lock()
	s.calls++
	fail := s.calls == 2
	s.mu.Unlock()
	if fail {
		return runs.Run{}, errors.New("host: get run: ProvisionedThroughputExceededException")
	}
	return s.logStore.Get(ctx, id)
}

// interruptedAt leaves a conformance-multi-node run running at the
// stack's now (interrupted).
func (s *capStack) interruptedAt(t *testing.T) runs.Run {
	t.Helper()
	return interrupted(t, s.store, s.clk.Now())
}

// restarted is a stack over store whose executor started (Booted) a
// second after a run it finds interrupted, and a second before now.
func restarted(t *testing.T, store logStore) (*capStack, runs.Run) {
	t.Helper()
	s := newCapStack(t, store)
	r := s.interruptedAt(t)
	s.clk.Set(s.clk.Now().Add(time.Second))
	s.x.Test.Booted = s.clk.Now()
	s.clk.Set(s.clk.Now().Add(time.Second))
	return s, r
}

// restoredCount counts workflow.restored in a run's log.
func restoredCount(r runs.Run) int {
	n := 0
	for _, e := range r.Log {
		if e.Type == EventWorkflowRestored {
			n++
		}
	}
	return n
}

// TestInterruptedRunNeverCompletesUnrecorded: a run interrupted by its
// executor's death is never completed without workflow.restored in its
// log, even when the first write of the event fails. Under
// TestConfig.Booted (`idemkit dev`), the execution that adopted the run
// and could not record the event fails, and the stream's retry, which
// finds the run updated by that adoption (after Booted), still records
// it before resuming. The stale-run pass does not resume a run whose
// event it could not record: a later pass claims it again and records
// it. Each case: exactly one workflow.restored, then the rest of the
// walk. On the memory store and the emulators.
func TestInterruptedRunNeverCompletesUnrecorded(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		want := "[node.started a workflow.restored  node.completed a node.started b node.completed b node.started c node.completed c]"

		t.Run("restarted executor", func(t *testing.T) {
			s, r := restarted(t, &restoreFails{logStore: store})
			if err := s.x.Execute(ctx, r.ID); err == nil {
				t.Fatalf("the execution whose workflow.restored failed reported no error (log %s)", logTypes(s.get(t, r.ID)))
			}
			if got := s.get(t, r.ID); got.Status != runs.StatusRunning || restoredCount(got) != 0 {
				t.Fatalf("after the failed record: %s %s", got.Status, logTypes(got))
			}
			s.clk.Set(s.clk.Now().Add(time.Second))
			if err := s.x.Execute(ctx, r.ID); err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if got := s.get(t, r.ID); got.Status != runs.StatusCompleted || logTypes(got) != want {
				t.Fatalf("the retry completed the run without recording it restored: %s %s", got.Status, logTypes(got))
			}
		})

		t.Run("read before the adoption fails", func(t *testing.T) {
			s, r := restarted(t, &secondGetFails{logStore: store})
			if err := s.x.Execute(ctx, r.ID); err == nil {
				t.Fatalf("an execution that could not tell whether the run was interrupted reported no error (log %s)", logTypes(s.get(t, r.ID)))
			}
			if err := s.x.Execute(ctx, r.ID); err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if got := s.get(t, r.ID); got.Status != runs.StatusCompleted || logTypes(got) != want {
				t.Fatalf("completed without recording it restored: %s %s", got.Status, logTypes(got))
			}
		})

		t.Run("stale-run pass", func(t *testing.T) {
			faulty := &restoreFails{logStore: store}
			s := newCapStack(t, faulty)
			s.x.StaleAfter = time.Minute
			r := s.interruptedAt(t)
			s.clk.Set(s.clk.Now().Add(2 * time.Minute))
			if _, err := s.x.ResumeStale(ctx); err == nil {
				t.Fatal("the pass whose workflow.restored failed reported no error")
			}
			if got := s.get(t, r.ID); got.Status.Terminal() || restoredCount(got) != 0 {
				t.Fatalf("the pass resumed the run without recording it restored: %s %s", got.Status, logTypes(got))
			}
			s.clk.Set(s.clk.Now().Add(2 * time.Minute))
			if n, err := s.x.ResumeStale(ctx); err != nil || n != 1 {
				t.Fatalf("the next pass: %d, %v", n, err)
			}
			if got := s.get(t, r.ID); got.Status != runs.StatusCompleted || logTypes(got) != want {
				t.Fatalf("the next pass: %s %s", got.Status, logTypes(got))
			}
		})

		t.Run("two deliveries at once", func(t *testing.T) {
			// Both deliveries of one restarted process find the run: the
			// one that reads it after the other adopted it still knows it
			// was interrupted, whichever records the event.
			for i := range 20 {
				s, r := restarted(t, store)
				var wg sync.WaitGroup
				for range 2 {
					wg.Add(1)
					go func() { defer wg.Done(); _ = s.x.Execute(ctx, r.ID) }()
				}
				wg.Wait()
				for range 3 {
					if got := s.get(t, r.ID); got.Status != runs.StatusCompleted {
						_ = s.x.Execute(ctx, r.ID) // the stream's retry of a fenced delivery
					}
				}
				got := s.get(t, r.ID)
				if got.Status != runs.StatusCompleted || restoredCount(got) < 1 || !strings.HasPrefix(logTypes(got), "[node.started a workflow.restored") {
					t.Fatalf("round %d: %s %s", i, got.Status, logTypes(got))
				}
			}
		})
	})
}
