package runs

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// waits records the waits createListed asks for (DynamoRuns.conflictWait)
// instead of waiting them.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, d)
	return ctx.Err()
}

func (w *waits) take() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

// keylessFixture is the setting of the keyless retry's transaction
// tests: a transactional DynamoRuns on e whose calls pass faults, its
// waits recorded in w, and a failed run of tenant acme to retry.
func keylessFixture(t *testing.T, e *dynamotest.Emulator) (rs *DynamoRuns, faults *dynamotest.Faults, w *waits, failed Run, now time.Time) {
	t.Helper()
	ctx := context.Background()
	now = time.Now().UTC().Truncate(time.Millisecond)
	faults = dynamotest.NewFaults()
	w = &waits{}
	rs = &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable"), Transactional: true,
		conflictWait: w.wait}
	failed = NewRun("acme", "webhook", nil, now)
	if err := rs.Create(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
		t.Fatal(err)
	}
	return rs, faults, w, failed, now
}

func conflictCancel() error {
	return &types.TransactionCanceledException{Message: aws.String("conflict"), CancellationReasons: []types.CancellationReason{
		{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}}}
}

// TestKeylessRetryConflictBackoff: a keyless retry's transaction
// (createListed) cancelled by a racing retry's transaction alone is sent
// again after a wait, not at once (RED_TEAM 379): before the send after
// the n-th, a wait drawn at random in [0, 10 ms × 2^(n-1)] (full jitter:
// 10, 20, 40 ms bounds), up to listedTries sends, then the error with
// nothing written. A create that meets no conflict waits for nothing.
// The waits asked for are recorded, never waited.
func TestKeylessRetryConflictBackoff(t *testing.T) {
	for try, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 20 * time.Millisecond, 3: 40 * time.Millisecond} {
		if got := listedWaitBound(try); got != want {
			t.Errorf("the bound of the wait after send %d: %v, want %v", try, got, want)
		}
	}
	if listedTries != 4 {
		t.Errorf("listedTries %d, want 4 sends", listedTries)
	}
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs, faults, w, failed, now := keylessFixture(t, e)
		newRetry := func() Run {
			r := NewRun("acme", "webhook", nil, now)
			r.RetryOf = failed.ID
			return r
		}

		if err := rs.Create(ctx, newRetry()); err != nil {
			t.Fatal(err)
		}
		if got := w.take(); len(got) != 0 {
			t.Fatalf("a create meeting no conflict asked for waits %v", got)
		}

		var all []time.Duration
		atBound := 0
		for round := range 8 {
			for conflicts := 1; conflicts <= listedTries; conflicts++ {
				r := newRetry()
				faults.FailNext("TransactWriteItems", conflicts, conflictCancel())
				err := rs.Create(ctx, r)
				if faults.Pending() != 0 {
					t.Fatalf("%d conflicts armed, not all met", conflicts)
				}
				faults.Clear()
				got := w.take()
				sends := min(conflicts+1, listedTries)
				if len(got) != sends-1 {
					t.Fatalf("%d conflicts: waits %v, want %d (one before each send after the first)", conflicts, got, sends-1)
				}
				for i, d := range got {
					if b := listedWaitBound(i + 1); d < 0 || d > b {
						t.Fatalf("%d conflicts: the wait before send %d is %v, outside [0, %v]", conflicts, i+2, d, b)
					} else if d == b {
						atBound++
					}
				}
				all = append(all, got...)
				_, gerr := rs.Get(ctx, r.ID)
				f, _ := rs.Get(ctx, failed.ID)
				if conflicts < listedTries && (err != nil || gerr != nil || !slices.Contains(f.Retries, r.ID)) {
					t.Fatalf("round %d, %d conflicts: %v, run %v, listed %v; want written and listed", round, conflicts, err, gerr, slices.Contains(f.Retries, r.ID))
				}
				if conflicts == listedTries && (err == nil || !errors.Is(gerr, ErrRunNotFound) || slices.Contains(f.Retries, r.ID)) {
					t.Fatalf("round %d, %d conflicts: %v, run %v, listed %v; want an error and nothing written", round, conflicts, err, gerr, slices.Contains(f.Retries, r.ID))
				}
			}
		}
		// Jittered: 8 × 9 waits drawn, not each its bound, not all one value.
		if atBound == len(all) || slices.Min(all) == slices.Max(all) {
			t.Fatalf("the waits are not jittered: %v", all)
		}
	})
}

// TestKeylessRetryConflictWaitCancelled: a keyless retry whose request's
// context ends during the wait after a conflict sends nothing more: the
// create ends with the conflict and the context's error (never answered
// as written), no run written, its id not listed, and no further wait
// asked for. A conflict after a send that applied with its answer lost
// leaves that run, written and listed once, as it was.
func TestKeylessRetryConflictWaitCancelled(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		now := time.Now().UTC().Truncate(time.Millisecond)
		faults := dynamotest.NewFaults()
		var asked int
		var cancel context.CancelFunc
		rs := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable"), Transactional: true,
			conflictWait: func(ctx context.Context, d time.Duration) error {
				asked++
				cancel() // the client hangs up, or the deadline passes, during the wait
				return ctx.Err()
			}}
		bg := context.Background()
		failed := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(bg, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(bg, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
			t.Fatal(err)
		}

		r := NewRun("acme", "webhook", nil, now)
		r.RetryOf = failed.ID
		ctx, stop := context.WithCancel(bg)
		defer stop()
		cancel = stop
		faults.FailNext("TransactWriteItems", listedTries, conflictCancel())
		err := rs.Create(ctx, r)
		if p := faults.Pending(); p != listedTries-1 {
			t.Fatalf("the transaction was sent %d times, want once", listedTries-p)
		}
		faults.Clear()
		var tce *types.TransactionCanceledException
		if !errors.Is(err, context.Canceled) || !errors.As(err, &tce) || errors.Is(err, ErrRunExists) {
			t.Fatalf("the create: %v, want the conflict and the context's end", err)
		}
		if asked != 1 {
			t.Fatalf("%d waits asked for, want 1", asked)
		}
		if _, gerr := rs.Get(bg, r.ID); !errors.Is(gerr, ErrRunNotFound) {
			t.Fatalf("a run was written: %v", gerr)
		}
		if f, _ := rs.Get(bg, failed.ID); slices.Contains(f.Retries, r.ID) {
			t.Fatal("the id was listed")
		}

		// Applied, its answer lost, then a conflict and the context's end
		// during the wait: the run the lost answer wrote is there, listed
		// once; nothing more written.
		lost := NewRun("acme", "webhook", nil, now)
		lost.RetryOf = failed.ID
		ctx, stop2 := context.WithCancel(bg)
		defer stop2()
		cancel = stop2
		asked = 0
		faults.FailNextAfterSend("TransactWriteItems", 1, dynamotest.ResponseLost())
		faults.FailNext("TransactWriteItems", listedTries, conflictCancel())
		err = rs.Create(ctx, lost)
		faults.Clear()
		if err == nil || asked != 1 {
			t.Fatalf("the create: %v after %d waits, want an error after one", err, asked)
		}
		if got, gerr := rs.Get(bg, lost.ID); gerr != nil || got.Status != StatusPending || got.Version != 1 {
			t.Fatalf("the run the lost answer wrote: %+v %v", got, gerr)
		}
		f, _ := rs.Get(bg, failed.ID)
		n := 0
		for _, id := range f.Retries {
			if id == lost.ID {
				n++
			}
		}
		if n != 1 || len(f.Retries) != 1 {
			t.Fatalf("the failed run lists %v", f.Retries)
		}
	})
}
