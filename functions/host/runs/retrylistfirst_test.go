package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRetryIsListedBeforeItIsWritten: without the completion transaction
// DynamoRuns lists a retry on its failed run before it writes the retry's
// run, so a retry refused at the cap never writes a run (the executor,
// started by the runs stream's INSERT, could take one and start its first
// node before it was cancelled). Each crash point between the two writes
// leaves no run the failed run does not list: the listing landed and the
// run's write failed leaves the id listed and no run, and the same Create
// again (the key's re-execution, its run id fixed) writes it even at the
// cap; a listing applied whose answer was lost is retried into the same
// one listing; a run write applied whose answer was lost keeps its
// listing; a run id found taken by a run that is no retry of the failed
// run is not left listed. On every engine.
func TestRetryIsListedBeforeItIsWritten(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults := dynamotest.NewFaults()
		cnt := dynamotest.NewCounter()
		rs := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware(), cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		failed := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
			t.Fatal(err)
		}
		retry := func() Run {
			r := NewRun("acme", "webhook", nil, now)
			r.RetryOf = failed.ID
			return r
		}
		listed := func() []string {
			t.Helper()
			f, err := rs.Get(ctx, failed.ID)
			if err != nil {
				t.Fatal(err)
			}
			return f.Retries
		}
		written := func(id string) bool {
			t.Helper()
			_, err := rs.Get(ctx, id)
			if err != nil && !errors.Is(err, ErrRunNotFound) {
				t.Fatal(err)
			}
			return err == nil
		}

		// The listing landed, the run's write did not.
		crashed := retry()
		faults.FailNext("PutItem", 50, dynamotest.InternalServerError())
		if err := rs.Create(ctx, crashed); err == nil {
			t.Fatal("a Create whose run write failed answered nil")
		}
		faults.Clear()
		if got := listed(); !slices.Equal(got, []string{crashed.ID}) || written(crashed.ID) {
			t.Fatalf("after the listing and a failed run write: listed %v, run written %v; want it listed and no run", got, written(crashed.ID))
		}
		// Other retries fill the list to the cap; the crashed one's
		// re-execution, listed already, writes its run.
		for i := range MaxRetries - 1 {
			if err := rs.LinkRetry(ctx, failed.ID, fmt.Sprintf("acme/%022d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := rs.Create(ctx, crashed); err != nil {
			t.Fatalf("the re-execution of a listed retry at the cap: %v", err)
		}
		if got := listed(); len(got) != MaxRetries || !written(crashed.ID) {
			t.Fatalf("after the re-execution: %d listed, run written %v", len(got), written(crashed.ID))
		}

		// Refused at the cap: no run is ever written, for anyone to take.
		over := retry()
		cnt.Reset()
		var limit *RetryLimitError
		if err := rs.Create(ctx, over); !errors.As(err, &limit) || limit.Retries != MaxRetries {
			t.Fatalf("a retry past the cap: %v; want a *RetryLimitError of %d", err, MaxRetries)
		}
		if ops := cnt.Ops(); ops["PutItem"] != 0 || cnt.Total() != 2 {
			t.Fatalf("the refusal cost %v; want the refused listing and a read of the failed run, no run write", ops)
		}
		if written(over.ID) {
			t.Fatal("a retry refused at the cap wrote its run")
		}

		// Below the cap again (a second failed run): a listing applied
		// whose answer was lost is retried by the SDK into one listing.
		second := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, second); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, second.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
			t.Fatal(err)
		}
		lost := NewRun("acme", "webhook", nil, now)
		lost.RetryOf = second.ID
		faults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
		if err := rs.Create(ctx, lost); err != nil {
			t.Fatalf("a Create whose listing's answer was lost: %v", err)
		}
		if f, _ := rs.Get(ctx, second.ID); !slices.Equal(f.Retries, []string{lost.ID}) || !written(lost.ID) {
			t.Fatalf("after a lost listing answer: listed %v, written %v", f.Retries, written(lost.ID))
		}

		// The run's write applied and its answer lost: the SDK's retry
		// finds the id taken (ErrRunExists, for the caller to read the run
		// as its own), and the run keeps its listing.
		lostPut := NewRun("acme", "webhook", nil, now)
		lostPut.RetryOf = second.ID
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		if err := rs.Create(ctx, lostPut); err != nil && !errors.Is(err, ErrRunExists) {
			t.Fatalf("a Create whose run write's answer was lost: %v", err)
		}
		if f, _ := rs.Get(ctx, second.ID); !slices.Contains(f.Retries, lostPut.ID) || !written(lostPut.ID) {
			t.Fatalf("after a lost run write answer: listed %v, written %v", f.Retries, written(lostPut.ID))
		}

		// A run id taken by a run that retries nothing: ErrRunExists, and
		// the failed run does not list it.
		stranger := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, stranger); err != nil {
			t.Fatal(err)
		}
		clash := lost
		clash.ID = stranger.ID
		if err := rs.Create(ctx, clash); !errors.Is(err, ErrRunExists) {
			t.Fatalf("a retry whose id is taken: %v, want ErrRunExists", err)
		}
		if f, _ := rs.Get(ctx, second.ID); slices.Contains(f.Retries, stranger.ID) {
			t.Fatalf("the failed run lists %s, a run that does not retry it", stranger.ID)
		}
	})
}
