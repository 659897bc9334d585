package execfn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// cancellingRuns cancels the executor's context when it starts a run, as
// idemkit dev's shutdown (Ctrl-C) does to a run it is starting: the
// store's call then fails with the context's error.
type cancellingRuns struct {
	*hostruns.MemRuns
	cancel context.CancelFunc
}

func (c cancellingRuns) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	c.cancel()
	return hostruns.Run{}, ctx.Err()
}

// TestStoppedExecutorCountsNoFailure: an execution cut because the
// executor's own context was cancelled (idemkit dev stopping) is not a
// failure of the run: no failure is counted against it (so stopping and
// starting again can never use up its tries), nothing is logged as a
// warning or an error, and its record is returned to be retried.
func TestStoppedExecutorCountsNoFailure(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	r := f.webhookRun(t, "http://127.0.0.1:1/unused")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.x.Runs = cancellingRuns{f.runs, cancel}
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", r)}); len(retry) != 1 || retry[0] != "e1" {
		t.Fatalf("retry %v, want the record back", retry)
	}
	got, err := f.runs.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Failures != 0 || got.Status.Terminal() {
		t.Errorf("run after a stop: %d failures, status %s; want none counted, not ended", got.Failures, got.Status)
	}
	if s := logs.String(); strings.Contains(s, `"level":"WARN"`) || strings.Contains(s, `"level":"ERROR"`) {
		t.Errorf("a stop logged a warning or an error:\n%s", s)
	}
}

// TestStoppedStaleRunPassIsQuiet: the stale-run pass cut because the
// executor's own context was cancelled (idemkit dev stopping) counts no
// failure against the run it was resuming and logs no warning or error:
// the run stays live, and a later pass resumes it.
func TestStoppedStaleRunPassIsQuiet(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	r := f.webhookRun(t, "http://127.0.0.1:1/unused")
	later := r.CreatedAt.Add(time.Hour)
	f.x.StaleAfter = time.Minute
	f.x.Test.Clock = ledgertest.ClockFuncs{NowFunc: func() time.Time { return later }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.x.Runs = cancellingRuns{f.runs, cancel}
	if n, err := f.x.ResumeStale(ctx); n != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("stale pass: %d runs, %v; want the run claimed, then the stop", n, err)
	}
	got, err := f.runs.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Failures != 0 || got.Status.Terminal() {
		t.Errorf("run after a stop: %d failures, status %s; want none counted, not ended", got.Failures, got.Status)
	}
	// Claiming the run logs its resumption as a warning (it had made no
	// progress): that one is not the stop's.
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if (strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)) &&
			!strings.Contains(line, "resuming a run without progress") {
			t.Errorf("a stop logged a warning or an error: %s", line)
		}
	}
}

// TestStoppedDuePassIsQuiet: the due-run pass cut by the executor's own
// stop logs no warning or error; the run it took (no longer parked) stays
// live, and the stale-run pass resumes it once it has made no progress
// for StaleAfter.
func TestStoppedDuePassIsQuiet(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	r := f.webhookRun(t, "http://127.0.0.1:1/unused")
	if err := f.runs.Schedule(context.Background(), r.ID, hostruns.Wake{At: r.CreatedAt, Attempt: 1, MaxAttempts: 3}, r.CreatedAt); err != nil {
		t.Fatal(err)
	}
	later := r.CreatedAt.Add(time.Hour)
	f.x.Test.Clock = ledgertest.ClockFuncs{NowFunc: func() time.Time { return later }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.x.Runs = cancellingRuns{f.runs, cancel}
	if _, err := f.x.ResumeDue(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("due pass: %v; want the stop", err)
	}
	got, err := f.runs.Get(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Failures != 0 || got.Status.Terminal() {
		t.Errorf("run after a stop: %d failures, status %s; want none counted, not ended", got.Failures, got.Status)
	}
	if ids, err := f.runs.Stale(context.Background(), later, 0); err != nil || len(ids) != 1 {
		t.Errorf("stale after a stop: %v %v; want the run found by the stale-run pass", ids, err)
	}
	if s := logs.String(); strings.Contains(s, `"level":"WARN"`) || strings.Contains(s, `"level":"ERROR"`) {
		t.Errorf("a stop logged a warning or an error:\n%s", s)
	}
}
