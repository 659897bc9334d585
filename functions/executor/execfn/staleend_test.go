package execfn

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// takenAtTheEnd is a run store on which another execution takes the run
// (RunStore.Adopt: a duplicate delivery, or the stale-run pass once the
// claim lapsed) right after the executor's last node event is recorded,
// before the executor's own end of the run lands.
type takenAtTheEnd struct {
	logStore
	last  string // the node whose node.completed is the execution's last event
	mu    sync.Mutex
	taken runs.Run
}

func (s *takenAtTheEnd) AppendLog(ctx context.Context, id string, f runs.Fence, evs []runs.LogEvent, now time.Time) (runs.Run, error) {
	r, err := s.logStore.AppendLog(ctx, id, f, evs, now)
	if err != nil || evs[len(evs)-1].Type != runs.EventNodeCompleted || evs[len(evs)-1].NodeID != s.last {
		return r, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken.ID == "" {
		if s.taken, err = s.logStore.Adopt(ctx, id, now); err != nil {
			return r, err
		}
	}
	return r, nil
}

// TestStaleExecutorCannotEndTheRun: an execution taken over by another
// after its last node event (its claim lapsed and the stale-run pass took
// the run, or a duplicate delivery adopted it) does not end the run: its
// completion is refused by the run's claim epoch, as its node-log appends
// and renewals are. It stops without a retry, logging at INFO; the run
// stays running under the execution that took it, which then ends it. On
// memory and every emulator.
func TestStaleExecutorCannotEndTheRun(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		s := newOvertakeStack(t, store)
		open := newGate()
		close(open.release)
		x1 := s.executor(open, &gatedTicker{ch: make(chan time.Time)})
		var logs bytes.Buffer
		x1.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		taking := &takenAtTheEnd{logStore: s.sig, last: "effect"}
		x1.Runs = taking
		r := s.slowRun(t)
		if err := x1.Execute(ctx, r.ID); err != nil {
			t.Fatalf("the overtaken execution: %v", err)
		}
		if taking.taken.ID == "" {
			t.Fatal("the run was never taken over")
		}
		got, err := store.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runs.StatusRunning || got.Epoch != taking.taken.Epoch {
			t.Fatalf("the overtaken execution ended the run: %s at epoch %d, want running at epoch %d (the taker's)",
				got.Status, got.Epoch, taking.taken.Epoch)
		}
		out := logs.String()
		if strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) {
			t.Fatalf("the refused end logged a failure:\n%s", out)
		}
		if !strings.Contains(out, "executor: run taken by another execution before it ended") {
			t.Fatalf("the refused end was not logged:\n%s", out)
		}
		// The execution that took the run over ends it, once.
		x2 := s.executor(open, &gatedTicker{ch: make(chan time.Time)})
		if err := x2.Execute(ctx, r.ID); err != nil {
			t.Fatalf("the taker: %v", err)
		}
		s.wantRun(t, r.ID, runs.StatusCompleted, 1, cleanLog...)
	})
}
