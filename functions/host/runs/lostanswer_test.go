package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

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
	// reads is how many GetItems write makes before its UpdateItem.
	reads int
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
			}, func(r, got runs.Run) bool { return is(runs.StatusRunning)(r, got) && got.Epoch == 1 }, 0},
		{"Cancel", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Cancel(ctx, r.ID, live, "", "no longer wanted", now)
			}, is(runs.StatusCancelled), 0},
		{"CancelAt", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.CancelAt(ctx, r.ID, r.Version, "", "", now)
			}, is(runs.StatusCancelled), 0},
		{"Finish", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Finish(ctx, r.ID, r.Epoch, runs.StatusCompleted, "", now)
			}, is(runs.StatusCompleted), 0},
		{"Breach", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				ev := runs.LogEvent{Type: runs.EventCapBreached, At: now, Payload: json.RawMessage(`{"kind":"runTimeoutMs","limit":1,"observed":2}`)}
				return rs.Breach(ctx, r.ID, ev, "run_timeout", "timeout", now)
			}, func(r, got runs.Run) bool { return is(runs.StatusFailed)(r, got) && len(got.Log) == 1 }, 0},
		{"Claim", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Claim(ctx, r.ID, now, now.Add(time.Minute))
			}, func(r, got runs.Run) bool { return got.Status == runs.StatusRunning && got.Epoch == r.Epoch+1 }, 0},
		{"Adopt", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Adopt(ctx, r.ID, now.Add(time.Second))
			}, func(r, got runs.Run) bool { return got.Status == runs.StatusRunning && got.Epoch == r.Epoch+1 }, 0},
		{"Park", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Park(ctx, r.ID, r.Epoch, runs.Wake{At: now.Add(time.Minute), Attempt: 1, MaxAttempts: 3}, now)
			}, func(r, got runs.Run) bool { return !got.Wake.IsZero() && got.Version == r.Version+1 }, 0},
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
			}, 0},
		{"Pause", running,
			func(ctx context.Context, rs *runs.DynamoRuns, r runs.Run, now time.Time) (runs.Run, error) {
				return rs.Pause(ctx, r.ID, runs.Pause{}, now)
			}, is(runs.StatusPaused), 1},
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
			}, is(runs.StatusRunning), 1},
	}
}

// runLoss is one way a run write's answers are lost or refused: arm
// injects it, answered says the call answers the run as written, applied
// that the write landed.
type runLoss struct {
	name              string
	arm               func(f *dynamotest.Faults)
	answered, applied bool
}

// runLosses are dynamotest.Losses as the run store answers them, and the
// cases where the SDK gives up: a write that landed while every try's
// answer was lost (lost on every try, lost then throttled) is read back on
// that error path and answered as written (RED_TEAM 520); a write
// throttled on every try never landed, and one whose read-back fails too
// cannot be told, and both stay errors, never a conflict. reads is how
// many GetItems the call makes before its write (Pause, Unpause: one),
// which the read-back's faults let by.
func runLosses(op string, reads int) []runLoss {
	out := []runLoss{}
	for _, c := range dynamotest.Losses(op) {
		out = append(out, runLoss{c.Name, c.Arm, true, true})
	}
	return append(out,
		runLoss{"lost on every try", func(f *dynamotest.Faults) { f.FailNextAfterSend(op, 3, dynamotest.ResponseLost()) }, true, true},
		runLoss{"throttled on every try", func(f *dynamotest.Faults) { f.FailNext(op, 3, dynamotest.Throttle()) }, false, false},
		runLoss{"lost then throttled, its read-back throttled", func(f *dynamotest.Faults) {
			f.FailNextAfterSend(op, 1, dynamotest.ResponseLost())
			f.FailNext(op, 2, dynamotest.Throttle())
			f.PassNext("GetItem", reads)
			f.FailNext("GetItem", 3, dynamotest.Throttle())
		}, false, true},
	)
}

// TestRunWriteLandedWithItsAnswerLost: the engine applies a run's
// conditional write and its answer is lost (a connection reset after the
// write), so the SDK sends it again, and the retry fails its own
// condition or would apply the write twice. The store recognises its own
// landed write: the call is answered as the write left the run (no
// ErrStatusConflict the caller did not cause), and the write is applied
// once (one version). When the SDK gives up, every try's answer lost or
// throttled, the run is read back on that error path: a write that landed
// is answered as written (RED_TEAM 520); one that did not, or whose
// read-back fails too, is an error, never a conflict.
func TestRunWriteLandedWithItsAnswerLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		for _, w := range lostWrites() {
			for _, c := range runLosses("UpdateItem", w.reads) {
				t.Run(w.name+"/"+c.name, func(t *testing.T) {
					t.Cleanup(f.Clear)
					ctx := context.Background()
					now := time.Now().Truncate(time.Millisecond)
					r := w.setup(t, rs, now)
					c.arm(f)
					got, err := w.write(ctx, rs, r, now.Add(time.Second))
					f.Clear()
					switch {
					case !c.answered && err == nil:
						t.Fatalf("the write's fate cannot be known, yet answered %+v", got)
					case !c.answered && errors.Is(err, runs.ErrStatusConflict):
						t.Fatalf("the SDK gave up: %v, want an error that is no conflict", err)
					case c.answered && err != nil:
						t.Fatalf("the write landed, its answers lost: %s %v; want the run as written", got.Status, err)
					case c.answered && !w.want(r, got):
						t.Fatalf("the write landed, its answers lost: answered %+v", got)
					}
					stored, gerr := rs.Get(ctx, r.ID)
					if gerr != nil {
						t.Fatal(gerr)
					}
					if c.applied && !w.want(r, stored) {
						t.Fatalf("stored after the lost answer: %+v (version %d, epoch %d; was %d, %d)", stored.Status, stored.Version, stored.Epoch, r.Version, r.Epoch)
					}
					if !c.applied && (stored.Version != r.Version || stored.Status != r.Status) {
						t.Fatalf("a write throttled on every try changed the run: %s version %d, was %s %d", stored.Status, stored.Version, r.Status, r.Version)
					}
				})
			}
		}
	})
}

// TestScheduleLandedWithEveryAnswerLost: Schedule is its own conditional
// UpdateItem (no run answered), carrying the call's token as updateRun's
// writes do: lost once or on every try, it is answered nil and applied
// once; throttled on every try, or its read-back throttled too, an error
// that is no conflict (RED_TEAM 520).
func TestScheduleLandedWithEveryAnswerLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		for _, c := range runLosses("UpdateItem", 0) {
			t.Run(c.name, func(t *testing.T) {
				t.Cleanup(f.Clear)
				ctx := context.Background()
				now := time.Now().Truncate(time.Millisecond)
				r := runs.NewRun(strings.Repeat("t", 8), "conformance-noop", nil, now)
				if err := rs.Create(ctx, r); err != nil {
					t.Fatal(err)
				}
				c.arm(f)
				err := rs.Schedule(ctx, r.ID, runs.Wake{At: now.Add(time.Minute), Attempt: 1, MaxAttempts: 3}, now)
				f.Clear()
				switch {
				case c.answered && err != nil:
					t.Fatalf("the schedule landed, its answers lost: %v", err)
				case !c.answered && (err == nil || errors.Is(err, runs.ErrStatusConflict) || errors.Is(err, runs.ErrRunNotFound)):
					t.Fatalf("the schedule's fate cannot be known: %v, want an error that is no conflict", err)
				}
				stored, err := rs.Get(ctx, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := r.Version
				if c.applied {
					want++
				}
				if stored.Version != want || stored.Wake.IsZero() != !c.applied {
					t.Fatalf("stored version %d, wake %+v; want version %d (applied: %v)", stored.Version, stored.Wake, want, c.applied)
				}
			})
		}
	})
}

// TestCreateLandedWithEveryAnswerLost: a run's conditional PutItem that
// landed with every answer lost (the SDK gave up) is answered as the
// SDK's refused retry answers one whose answer was lost once: the run
// found at its id (ErrRunExists; a *RunExistsError holding it where the
// store has it, which the handler answers as its own create by its
// creation time), read back on that error path only (RED_TEAM 523). Before, the call was an error while its run stood: a
// keyless createRun answered 503 for a run that then executed, and its
// client's retry created a second one. One throttled on every try, or
// whose read-back fails too, is an error, and no run or one stands as
// the write left it.
func TestCreateLandedWithEveryAnswerLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		for _, c := range runLosses("PutItem", 0) {
			t.Run(c.name, func(t *testing.T) {
				t.Cleanup(f.Clear)
				ctx := context.Background()
				r := runs.NewRun(strings.Repeat("t", 8), "conformance-noop", nil, time.Now())
				c.arm(f)
				err := rs.Create(ctx, r)
				f.Clear()
				var taken *runs.RunExistsError
				switch {
				case c.answered && err != nil && !errors.Is(err, runs.ErrRunExists):
					t.Fatalf("the create landed, its answers lost: %v; want its run found at its id", err)
				case c.answered && errors.As(err, &taken) && (taken.Run.ID != r.ID || !taken.Run.CreatedAt.Equal(r.CreatedAt.Truncate(time.Millisecond))):
					t.Fatalf("the create landed, its answers lost: answered %+v; want its run", taken.Run)
				case !c.answered && (err == nil || errors.Is(err, runs.ErrRunExists)):
					t.Fatalf("the create's fate cannot be known: %v, want an error", err)
				}
				_, gerr := rs.Get(ctx, r.ID)
				if c.applied != (gerr == nil) {
					t.Fatalf("stored after the create: %v (applied: %v)", gerr, c.applied)
				}
			})
		}
	})
}

// TestRequestRefusedAsSuchIsNotReadBack: a run write the engine refuses
// as a request (a ValidationException: an item over the size limit) was
// applied by no try, and costs no read-back (RED_TEAM 520): a run near
// the size limit would cost up to 100 read units on each such refusal.
// Any other error is read back once.
func TestRequestRefusedAsSuchIsNotReadBack(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f, cnt := dynamotest.NewFaults(), dynamotest.NewCounter()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware(), cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		ctx := context.Background()
		now := time.Now()
		for _, c := range []struct {
			name  string
			err   error
			reads int
		}{
			{"a ValidationException", &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size", Fault: smithy.FaultClient}, 0},
			{"an internal error", dynamotest.InternalServerError(), 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := runs.NewRun(strings.Repeat("t", 8), "conformance-noop", nil, now)
				if err := rs.Create(ctx, r); err != nil {
					t.Fatal(err)
				}
				f.FailNext("UpdateItem", 1, c.err)
				defer f.Clear()
				cnt.Reset()
				if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now); err == nil || errors.Is(err, runs.ErrStatusConflict) {
					t.Fatalf("a refused write: %v, want its error", err)
				}
				if got := cnt.Ops()["GetItem"]; got != c.reads {
					t.Fatalf("%d reads after the refusal, want %d (%v)", got, c.reads, cnt.Ops())
				}
			})
		}
	})
}
