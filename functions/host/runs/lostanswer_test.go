package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// lostWrite is one conditional write of DynamoRuns whose answer a test
// loses: setup brings a run to where the write applies, write makes it
// (its own call, with no writer token of the caller's: no by, no pause
// By), want checks the run the write answered.
type lostWrite struct {
	name  string
	setup func(t *testing.T, rs *runs.DynamoRuns, now time.Time) runs.Run
	write func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error)
	want  func(r, got runs.Run) bool
}

// lostWrites are the run writes whose retry, once the first send landed,
// fails its own condition (the run moved on by that very write), and the
// ones whose retry would apply a second time.
func lostWrites() []lostWrite {
	live := []runs.Status{runs.StatusPending, runs.StatusRunning, runs.StatusPaused}
	created := func(t *testing.T, rs *runs.DynamoRuns, now time.Time) runs.Run {
		t.Helper()
		r := runs.NewRun(strings.Repeat("t", 8), "conformance-noop", nil, now)
		if err := rs.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	running := func(t *testing.T, rs *runs.DynamoRuns, now time.Time) runs.Run {
		t.Helper()
		r := created(t, rs, now)
		got, err := rs.Transition(context.Background(), r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	is := func(s runs.Status) func(r, got runs.Run) bool {
		return func(r, got runs.Run) bool { return got.Status == s && got.Version == r.Version+1 }
	}
	return []lostWrite{
		{"Transition/start", created,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
			}, func(r, got runs.Run) bool { return is(runs.StatusRunning)(r, got) && got.Epoch == 1 }},
		{"Cancel", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Cancel(ctx, r.ID, live, "", "no longer wanted", now)
			}, is(runs.StatusCancelled)},
		{"CancelAt", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.CancelAt(ctx, r.ID, r.Version, "", "", now)
			}, is(runs.StatusCancelled)},
		{"Finish", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Finish(ctx, r.ID, r.Epoch, runs.StatusCompleted, "", now)
			}, is(runs.StatusCompleted)},
		{"Breach", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				ev := runs.LogEvent{Type: runs.EventCapBreached, At: now, Payload: json.RawMessage(`{"kind":"runTimeoutMs","limit":1,"observed":2}`)}
				return rs.Breach(ctx, r.ID, ev, "run_timeout", "timeout", now)
			}, func(r, got runs.Run) bool { return is(runs.StatusFailed)(r, got) && len(got.Log) == 1 }},
		{"Claim", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Claim(ctx, r.ID, now, now.Add(time.Minute))
			}, func(r, got runs.Run) bool { return got.Status == runs.StatusRunning && got.Epoch == r.Epoch+1 }},
		{"Adopt", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Adopt(ctx, r.ID, now.Add(time.Second))
			}, func(r, got runs.Run) bool { return got.Status == runs.StatusRunning && got.Epoch == r.Epoch+1 }},
		{"Park", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Park(ctx, r.ID, r.Epoch, runs.Wake{At: now.Add(time.Minute), Attempt: 1, MaxAttempts: 3}, now)
			}, func(r, got runs.Run) bool { return !got.Wake.IsZero() && got.Version == r.Version+1 }},
		{"Resume",
			func(t *testing.T, rs *runs.DynamoRuns, now time.Time) runs.Run {
				t.Helper()
				r := running(t, rs, now)
				got, err := rs.Park(context.Background(), r.ID, r.Epoch, runs.Wake{At: now, Attempt: 1, MaxAttempts: 3}, now)
				if err != nil {
					t.Fatal(err)
				}
				return got
			},
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Resume(ctx, r.ID, now.Add(time.Second))
			}, func(r, got runs.Run) bool {
				return got.Wake.IsZero() && got.Epoch == r.Epoch+1 && got.Version == r.Version+1
			}},
		{"Pause", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Pause(ctx, r.ID, runs.Pause{}, now)
			}, is(runs.StatusPaused)},
		{"Unpause",
			func(t *testing.T, rs *runs.DynamoRuns, now time.Time) runs.Run {
				t.Helper()
				r := running(t, rs, now)
				got, err := rs.Pause(context.Background(), r.ID, runs.Pause{}, now)
				if err != nil {
					t.Fatal(err)
				}
				return got
			},
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Unpause(ctx, r.ID, "", "", now.Add(time.Second))
			}, is(runs.StatusRunning)},
	}
}

// TestRunWriteLandedWithItsAnswerLost: the engine applies a run's
// conditional write and its answer is lost (a connection reset after the
// write), so the SDK sends it again, and the retry fails its own
// condition or would apply the write twice. The store recognises its own
// landed write: the call is answered as the write left the run (no
// ErrStatusConflict the caller did not cause), and the write is applied
// once (one version); when the SDK gives up (lost, then throttled) the
// call is an error, never a conflict, and the write stands.
func TestRunWriteLandedWithItsAnswerLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		for _, w := range lostWrites() {
			for _, c := range dynamotest.Losses("UpdateItem") {
				t.Run(w.name+"/"+c.Name, func(t *testing.T) {
					t.Cleanup(f.Clear)
					ctx := context.Background()
					now := time.Now().Truncate(time.Millisecond)
					r := w.setup(t, rs, now)
					c.Arm(f)
					got, err := w.write(ctx, rs, r, now.Add(time.Second))
					f.Clear()
					switch {
					case !c.Landed && err == nil:
						t.Fatalf("the SDK gave up, yet answered %+v", got)
					case !c.Landed && errors.Is(err, runs.ErrStatusConflict):
						t.Fatalf("the SDK gave up: %v, want an error that is no conflict", err)
					case c.Landed && err != nil:
						t.Fatalf("the write landed, its answer lost: %s %v; want the run as written", got.Status, err)
					case c.Landed && !w.want(r, got):
						t.Fatalf("the write landed, its answer lost: answered %+v", got)
					}
					stored, gerr := rs.Get(ctx, r.ID)
					if gerr != nil {
						t.Fatal(gerr)
					}
					if !w.want(r, stored) {
						t.Fatalf("stored after the lost answer: %+v (version %d, epoch %d; was %d, %d)", stored.Status, stored.Version, stored.Epoch, r.Version, r.Epoch)
					}
				})
			}
		}
	})
}
