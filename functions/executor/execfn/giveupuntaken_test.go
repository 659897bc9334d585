package execfn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
)

// startedByAnother is a run store on which this execution's start of the
// run (pending -> running) or its record of the run restored is refused
// (a store error: throttled past the SDK's retries), and on which another
// execution takes the run right before the failed one counts its failure:
// a second delivery of the run's record starts it (Transition pending ->
// running), or, for a run already running, adopts it (Adopt).
type startedByAnother struct {
	logStore
	mu    sync.Mutex
	taken runs.Run
}

func (s *startedByAnother) Transition(ctx context.Context, id string, from []runs.Status, to runs.Status, msg string, now time.Time) (runs.Run, error) {
	if to == runs.StatusRunning {
		return runs.Run{}, errors.New("runs table throttled (injected)")
	}
	return s.logStore.Transition(ctx, id, from, to, msg, now)
}

func (s *startedByAnother) AppendLog(ctx context.Context, id string, f runs.Fence, evs []runs.LogEvent, now time.Time) (runs.Run, error) {
	if len(evs) == 1 && evs[0].Type == EventWorkflowRestored {
		return runs.Run{}, errors.New("runs table throttled (injected)")
	}
	return s.logStore.AppendLog(ctx, id, f, evs, now)
}

func (s *startedByAnother) NoteFailure(ctx context.Context, id, msg string, now time.Time) (int, error) {
	s.mu.Lock()
	if s.taken.ID == "" {
		cur, err := s.logStore.Get(ctx, id)
		if err == nil && cur.Status == runs.StatusPending {
			s.taken, err = s.logStore.Transition(ctx, id, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
		} else if err == nil {
			s.taken, err = s.logStore.Adopt(ctx, id, now)
		}
		if err != nil {
			s.mu.Unlock()
			return 0, err
		}
	}
	s.mu.Unlock()
	return s.logStore.NoteFailure(ctx, id, msg, now)
}

// TestLastTryLeavesARunAnotherExecutionStarted: the last try of a run
// whose execution failed before it took the run (its start, pending ->
// running, refused by the store; the stale-run pass's record of the run
// restored refused) gives the run up only while no other execution holds
// it. Started by a second delivery (or adopted) between the failure and
// the give-up, the run is that execution's: the give-up leaves it running
// under the taker (INFO), and the taker ends it completed, its webhook
// delivered once. Before, the give-up failed the run under the taker
// ("gave up after 1 attempts"), whose end was then refused: a run whose
// delivery went out read failed. On memory and every emulator.
func TestLastTryLeavesARunAnotherExecutionStarted(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		for _, via := range []string{"stream", "stale-run pass"} {
			t.Run(via, func(t *testing.T) {
				ctx := context.Background()
				s := newOvertakeStack(t, store)
				open := newGate()
				close(open.release)
				x1 := s.executor(open, &gatedTicker{ch: make(chan time.Time)})
				x1.MaxAttempts = 1
				var logs bytes.Buffer
				x1.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
				taking := &startedByAnother{logStore: s.sig}
				x1.Runs = taking
				r := s.slowRun(t)
				if via == "stream" {
					if retry := x1.HandleRecords(ctx, []stream.StreamRecord{insert("e1", r)}); len(retry) != 0 {
						t.Fatalf("the last try's record was retried: %v\n%s", retry, logs.String())
					}
				} else {
					// Started by an execution that died; its claim lapses.
					if _, err := store.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", s.clk.Now()); err != nil {
						t.Fatal(err)
					}
					s.clk.Set(s.clk.Now().Add(time.Minute))
					if _, err := x1.ResumeStale(ctx); err != nil {
						t.Fatalf("stale-run pass: %v\n%s", err, logs.String())
					}
				}
				if taking.taken.ID == "" {
					t.Fatalf("the run was never taken by another execution\n%s", logs.String())
				}
				got, err := store.Get(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != runs.StatusRunning || got.Epoch != taking.taken.Epoch {
					t.Fatalf("the last try gave up a run another execution held: %s (%s) at epoch %d, want running at epoch %d (the taker's)\n%s",
						got.Status, got.Error, got.Epoch, taking.taken.Epoch, logs.String())
				}
				if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "executor: run taken by another execution before it was given up") {
					t.Fatalf("the left run was not logged at INFO:\n%s", out)
				}
				takerEnds(ctx, t, s, open, r.ID)
			})
		}
	})
}
