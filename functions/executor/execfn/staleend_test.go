package execfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
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
		takerEnds(ctx, t, s, open, r.ID)
	})
}

// takerEnds runs the execution that took run id over, which ends it
// completed, once, with a clean node log.
func takerEnds(ctx context.Context, t *testing.T, s *overtakeStack, open *gate, id string) {
	t.Helper()
	if err := s.executor(open, &gatedTicker{ch: make(chan time.Time)}).Execute(ctx, id); err != nil {
		t.Fatalf("the taker: %v", err)
	}
	s.wantRun(t, id, runs.StatusCompleted, 1, cleanLog...)
}

// takenBeforeGiveUp is a run store whose node-log appends fail (a store
// error: the execution fails transiently), and on which another execution
// takes the run (RunStore.Adopt) right before the failed one counts its
// failure: between the failure and the give-up of its last try.
type takenBeforeGiveUp struct {
	logStore
	mu    sync.Mutex
	taken runs.Run
}

func (s *takenBeforeGiveUp) AppendLog(context.Context, string, runs.Fence, []runs.LogEvent, time.Time) (runs.Run, error) {
	return runs.Run{}, errors.New("runs table throttled (injected)")
}

func (s *takenBeforeGiveUp) NoteFailure(ctx context.Context, id, msg string, now time.Time) (int, error) {
	s.mu.Lock()
	if s.taken.ID == "" {
		var err error
		if s.taken, err = s.logStore.Adopt(ctx, id, now); err != nil {
			s.mu.Unlock()
			return 0, err
		}
	}
	s.mu.Unlock()
	return s.logStore.NoteFailure(ctx, id, msg, now)
}

// TestLastTryLeavesARunAnotherExecutionTook: the stream's last try of a
// run (MaxAttempts) whose execution failed transiently gives the run up
// (failed) only if that execution still holds it. Taken by another
// execution between the failure and the give-up (a duplicate delivery, the
// stale-run pass), the run is that execution's to end: the last try
// leaves it running under the taker, logs at INFO, and its record is done.
// The taker then ends it. On memory and every emulator.
func TestLastTryLeavesARunAnotherExecutionTook(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		s := newOvertakeStack(t, store)
		open := newGate()
		close(open.release)
		x1 := s.executor(open, &gatedTicker{ch: make(chan time.Time)})
		x1.MaxAttempts = 1
		var logs bytes.Buffer
		x1.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		taking := &takenBeforeGiveUp{logStore: s.sig}
		x1.Runs = taking
		r := s.slowRun(t)
		if retry := x1.HandleRecords(ctx, []stream.StreamRecord{insert("e1", r)}); len(retry) != 0 {
			t.Fatalf("the last try's record was retried: %v\n%s", retry, logs.String())
		}
		if taking.taken.ID == "" {
			t.Fatal("the run was never taken over")
		}
		got, err := store.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runs.StatusRunning || got.Epoch != taking.taken.Epoch {
			t.Fatalf("the last try gave up a run another execution held: %s (%s) at epoch %d, want running at epoch %d (the taker's)",
				got.Status, got.Error, got.Epoch, taking.taken.Epoch)
		}
		if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "executor: run taken by another execution before it was given up") {
			t.Fatalf("the left run was not logged at INFO:\n%s", out)
		}
		takerEnds(ctx, t, s, open, r.ID)
	})
}

// takenBeforePark is a run store on which another execution takes the run
// (RunStore.Adopt) right before the executor parks it until its effect's
// next attempt.
type takenBeforePark struct {
	logStore
	mu    sync.Mutex
	taken runs.Run
}

func (s *takenBeforePark) take(ctx context.Context, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken.ID != "" {
		return nil
	}
	var err error
	s.taken, err = s.logStore.Adopt(ctx, id, now)
	return err
}

func (s *takenBeforePark) Park(ctx context.Context, id string, epoch int64, w runs.Wake, now time.Time) (runs.Run, error) {
	if err := s.take(ctx, id, now); err != nil {
		return runs.Run{}, err
	}
	return s.logStore.Park(ctx, id, epoch, w, now)
}

// TestStaleExecutorCannotParkTheRun: an execution whose effect is to be
// tried later, taken over by another before it parks the run (its claim
// lapsed, a duplicate delivery adopted it), does not park it: the park is
// refused by the run's claim epoch, so the run is not made due (a due pass
// would take it from the execution holding it) nor kept from the stale-run
// pass by a wake its holder never set. The execution stops (INFO, its
// record done); the run stays running, unparked, under the taker. On
// memory and every emulator.
func TestStaleExecutorCannotParkTheRun(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		s := newOvertakeStack(t, store)
		busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer busy.Close()
		open := newGate()
		close(open.release)
		x1 := s.executor(open, &gatedTicker{ch: make(chan time.Time)})
		var logs bytes.Buffer
		x1.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		taking := &takenBeforePark{logStore: s.sig}
		x1.Runs = taking
		in, _ := json.Marshal(map[string]any{"url": busy.URL + "/hook", "payload": 1})
		r := runs.NewRun("acme", webhook.WorkflowWebhook, in, s.clk.Now())
		if err := store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if retry := x1.HandleRecords(ctx, []stream.StreamRecord{insert("e1", r)}); len(retry) != 0 {
			t.Fatalf("the stale execution's record was retried: %v\n%s", retry, logs.String())
		}
		if taking.taken.ID == "" {
			t.Fatal("the run was never taken over (the effect did not ask to be tried later?)")
		}
		got, err := store.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != runs.StatusRunning || got.Epoch != taking.taken.Epoch || !got.Wake.IsZero() {
			t.Fatalf("the stale execution parked the run another held: %s at epoch %d, wake %+v; want running, unparked, at epoch %d",
				got.Status, got.Epoch, got.Wake, taking.taken.Epoch)
		}
		if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) ||
			!strings.Contains(out, "executor: run taken by another execution before it was parked") {
			t.Fatalf("the refused park was not logged at INFO alone:\n%s", out)
		}
	})
}
