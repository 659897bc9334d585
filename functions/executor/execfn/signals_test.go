package execfn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/testutil"
)

// outageRuns is a run store whose table cannot be reached for the calls
// set to fail: the executor's day-two signals are tested against it.
type outageRuns struct {
	hostruns.RunStore
	transition, due, stale bool
}

var errOutage = errors.New("runs table unreachable (injected)")

func (o *outageRuns) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if o.transition {
		return hostruns.Run{}, errOutage
	}
	return o.RunStore.Transition(ctx, id, from, to, msg, now)
}

func (o *outageRuns) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	if o.due {
		return nil, errOutage
	}
	return o.RunStore.Due(ctx, now, limit)
}

func (o *outageRuns) Stale(ctx context.Context, before time.Time, limit int) ([]string, error) {
	if o.stale {
		return nil, errOutage
	}
	return o.RunStore.Stale(ctx, before, limit)
}

// TestRetriedRunsAreCounted: a run whose execution fails and whose stream
// record is handed back for a retry (a partial batch response, which never
// fails the invocation, so Lambda's Errors metric never sees it) is
// counted in MetricRetriedRuns, once per failed run, not per record
// handed back behind it.
func TestRetriedRunsAreCounted(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	first, second := f.webhookRun(t, rc.srv.URL), f.webhookRun(t, rc.srv.URL)
	f.x.Runs = &outageRuns{RunStore: f.runs, transition: true}
	var metrics testutil.SyncBuffer
	f.x.Metrics = emf.New(&metrics, "idemkit")
	retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", first), insert("e2", second)})
	if strings.Join(retry, ",") != "e1,e2" {
		t.Fatalf("records handed back %v, want e1,e2", retry)
	}
	if n := strings.Count(metrics.String(), `"`+MetricRetriedRuns+`":1`); n != 1 {
		t.Fatalf("%d counts of %s, want 1:\n%s", n, MetricRetriedRuns, metrics.String())
	}
}

// TestSchedulePassFailsWhenTheRunsTableCannotBeQueried: the minute
// schedule's pass fails its invocation (so the executor-errors alarm sees
// it) and logs an error when the due-runs or the stale-runs query fails;
// a pass whose queries answer succeeds, whatever its runs do.
func TestSchedulePassFailsWhenTheRunsTableCannotBeQueried(t *testing.T) {
	for _, c := range []struct {
		name       string
		due, stale bool
	}{{"due-runs query", true, false}, {"stale-runs query", false, true}, {"both", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			var logs bytes.Buffer
			f.x.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			f.x.Runs = &outageRuns{RunStore: f.runs, due: c.due, stale: c.stale}
			_, err := f.x.HandleInvoke(context.Background(), json.RawMessage(`{"resumeDue": true}`))
			if !errors.Is(err, ErrRunsQuery) || !errors.Is(err, errOutage) {
				t.Fatalf("schedule pass: %v, want ErrRunsQuery wrapping the store's error", err)
			}
			if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "could not be queried") {
				t.Fatalf("no error line for the failed query:\n%s", logs.String())
			}
		})
	}
	f := newFixture(t)
	if _, err := f.x.HandleInvoke(context.Background(), json.RawMessage(`{"resumeDue": true}`)); err != nil {
		t.Fatalf("a pass whose queries answer: %v", err)
	}
}

// flakyStart is a run store whose first Transition fails (the run's
// start: the runs table throttled once); every later call goes through.
type flakyStart struct {
	hostruns.RunStore
	failed bool
}

func (f *flakyStart) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if !f.failed {
		f.failed = true
		return hostruns.Run{}, errOutage
	}
	return f.RunStore.Transition(ctx, id, from, to, msg, now)
}

// TestGivenUpRunsAreCounted: a run the stream's last try gives up (ended
// failed, "gave up after N attempts") is counted in MetricGivenUpRuns, once,
// whatever StreamMaxRetries is: with none (MaxAttempts 1) the first
// failure is the last try, no record is handed back, and
// MetricRetriedRuns counts nothing, so without it a run failed by the
// host itself is an ERROR log line and no metric.
func TestGivenUpRunsAreCounted(t *testing.T) {
	for _, maxAttempts := range []int{1, 2} {
		f := newFixture(t)
		rc := newReceiver(t)
		run := f.webhookRun(t, rc.srv.URL)
		var metrics testutil.SyncBuffer
		f.x.Metrics = emf.New(&metrics, "idemkit")
		f.x.MaxAttempts = maxAttempts
		f.x.Runs = &outageRuns{RunStore: f.runs, transition: true}
		for i := 1; i < maxAttempts; i++ {
			if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); len(retry) != 1 {
				t.Fatalf("try %d of %d: records handed back %v, want e1", i, maxAttempts, retry)
			}
		}
		f.x.Runs = &flakyStart{RunStore: f.runs}
		if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); len(retry) != 0 {
			t.Fatalf("the last try handed back %v", retry)
		}
		if got, err := f.runs.Get(context.Background(), run.ID); err != nil || got.Status != hostruns.StatusFailed || !strings.Contains(got.Error, "gave up") {
			t.Fatalf("MaxAttempts %d: the run after its last try: %+v %v, want failed, gave up", maxAttempts, got, err)
		}
		if n := strings.Count(metrics.String(), `"`+MetricGivenUpRuns+`":1`); n != 1 {
			t.Fatalf("MaxAttempts %d: %d counts of %s, want 1:\n%s", maxAttempts, n, MetricGivenUpRuns, metrics.String())
		}
		if n := strings.Count(metrics.String(), `"`+MetricRetriedRuns+`":1`); n != maxAttempts-1 {
			t.Fatalf("MaxAttempts %d: %d counts of %s, want %d:\n%s", maxAttempts, n, MetricRetriedRuns, maxAttempts-1, metrics.String())
		}
	}
}
