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

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/testutil"
)

// expiringRuns ends the run under the executor just before the
// executor's own end of it lands: a cancel, then the cancelled run's
// retention elapses (the clock jumps past it), so the executor's
// completion finds no run at all, as DynamoDB's TTL leaves it.
type expiringRuns struct {
	*hostruns.MemRuns
	mu  sync.Mutex
	now time.Time
}

func (e *expiringRuns) clock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *expiringRuns) Finish(ctx context.Context, id string, epoch int64, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if _, err := e.MemRuns.Cancel(ctx, id, []hostruns.Status{hostruns.StatusPending, hostruns.StatusRunning}, "once:op", "", e.clock()); err != nil {
		return hostruns.Run{}, err
	}
	e.mu.Lock()
	e.now = e.now.Add(2 * e.Retention)
	e.mu.Unlock()
	return e.MemRuns.Finish(ctx, id, epoch, to, msg, now)
}

// TestExecutorEndingAnExpiredRunLeavesIt: a run cancelled while its
// executor still works on it, and whose retention then elapses before the
// executor ends it, is gone when the executor's completion lands. The
// executor leaves it, as it leaves a run that ended meanwhile: the record
// is done (not retried), and no failure is counted or logged as an error.
func TestExecutorEndingAnExpiredRunLeavesIt(t *testing.T) {
	start := time.Now().UTC()
	store := &expiringRuns{MemRuns: hostruns.NewMemRuns(), now: start}
	store.Retention = time.Hour
	store.Now = store.clock
	var logs bytes.Buffer
	x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	r := hostruns.NewRun("acme", "conformance-noop", nil, start)
	if err := store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", r)}); len(retry) != 0 {
		t.Fatalf("the completion of a run that expired meanwhile was retried (%v); logs:\n%s", retry, logs.String())
	}
	if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) {
		t.Fatalf("the completion of a run that expired meanwhile logged a failure:\n%s", out)
	}
	if _, err := store.Get(context.Background(), r.ID); err == nil {
		t.Fatal("the run was not gone")
	}
}

// failingExpiringRuns fails the executor's start of the run with a store
// error, and meanwhile the run is cancelled and its retention elapses, so
// the failure the executor then counts (NoteFailure) finds no run.
type failingExpiringRuns struct{ *expiringRuns }

func (f failingExpiringRuns) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if _, err := f.MemRuns.Cancel(ctx, id, []hostruns.Status{hostruns.StatusPending, hostruns.StatusRunning}, "once:op", "", f.clock()); err != nil {
		return hostruns.Run{}, err
	}
	f.mu.Lock()
	f.now = f.now.Add(2 * f.Retention)
	f.mu.Unlock()
	return hostruns.Run{}, errors.New("runs table throttled (injected)")
}

// TestExecutorFailureOfAnExpiredRunIsNotRetried: an execution that fails
// transiently while its run is cancelled and then expires (deleted by its
// retention) has no failure to count: the run is gone. The record is done
// (not retried: a retry would only find no run), nothing is logged as an
// error or a warning and no retried run is counted.
func TestExecutorFailureOfAnExpiredRunIsNotRetried(t *testing.T) {
	start := time.Now().UTC()
	store := failingExpiringRuns{&expiringRuns{MemRuns: hostruns.NewMemRuns(), now: start}}
	store.Retention = time.Hour
	store.Now = store.clock
	var logs, metrics testutil.SyncBuffer
	x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: emf.New(&metrics, "idemkit"), MaxAttempts: 3}
	r := hostruns.NewRun("acme", "conformance-noop", nil, start)
	if err := store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", r)}); len(retry) != 0 {
		t.Fatalf("the failure of a run that expired meanwhile was retried (%v); logs:\n%s", retry, logs.String())
	}
	if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) {
		t.Fatalf("the failure of a run that expired meanwhile logged a failure:\n%s", out)
	}
	if strings.Contains(metrics.String(), MetricRetriedRuns) {
		t.Fatalf("a retried run was counted:\n%s", metrics.String())
	}
	if _, err := store.Get(context.Background(), r.ID); err == nil {
		t.Fatal("the run was not gone")
	}
}

// expiringAfterCount lets the executor count its failure, and then the
// run is cancelled and its retention elapses before the last try gives it
// up.
type expiringAfterCount struct{ *expiringRuns }

func (e expiringAfterCount) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if to == hostruns.StatusRunning {
		return hostruns.Run{}, errors.New("runs table throttled (injected)")
	}
	return e.MemRuns.Transition(ctx, id, from, to, msg, now)
}

func (e expiringAfterCount) NoteFailure(ctx context.Context, id, msg string, now time.Time) (int, error) {
	n, err := e.MemRuns.NoteFailure(ctx, id, msg, now)
	if err != nil {
		return n, err
	}
	if _, err := e.MemRuns.Cancel(ctx, id, []hostruns.Status{hostruns.StatusPending, hostruns.StatusRunning}, "once:op", "", e.clock()); err != nil {
		return 0, err
	}
	e.mu.Lock()
	e.now = e.now.Add(2 * e.Retention)
	e.mu.Unlock()
	return n, nil
}

// TestLastTryOfAnExpiredRunIsDone: the last try's give-up of a run that
// was cancelled and expired after its failure was counted finds no run to
// fail: the record is done, nothing logged as an error.
func TestLastTryOfAnExpiredRunIsDone(t *testing.T) {
	start := time.Now().UTC()
	store := expiringAfterCount{&expiringRuns{MemRuns: hostruns.NewMemRuns(), now: start}}
	store.Retention = time.Hour
	store.Now = store.clock
	var logs bytes.Buffer
	x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), MaxAttempts: 1}
	r := hostruns.NewRun("acme", "conformance-noop", nil, start)
	if err := store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", r)}); len(retry) != 0 {
		t.Fatalf("the give-up of a run that expired meanwhile was retried (%v); logs:\n%s", retry, logs.String())
	}
	if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, `"level":"WARN"`) {
		t.Fatalf("the give-up of a run that expired meanwhile logged a failure:\n%s", out)
	}
}
