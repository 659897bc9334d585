package execfn

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
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
