package runs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCreateHandsBackTheRunItFound: without transactions, a Create whose
// id is taken asks its refused PutItem for the item there (ALL_OLD) and
// hands the run back in its error (*RunExistsError, matching
// ErrRunExists), so its caller does not read it again. moto returns the
// item; DynamoDB Local and dynalite do not, and there a plain Create is
// ErrRunExists alone (one round trip) while a retry's Create reads the
// run it must tell (its own run or a stranger's) and hands that back. A
// retry's Create found its own run keeps its listing (Listed): its
// listing, the refused write and, without ALL_OLD, the read; 2 or 3
// round trips, where it cost 3 and then its caller's read and LinkRetry.
// A stranger's run at the id is handed back unlisted, its listing taken
// off again. On every engine.
func TestCreateHandsBackTheRunItFound(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		rs := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		allOld := e.Caps.ReturnValuesOnConditionCheckFailure
		read := 0
		if !allOld {
			read = 1
		}
		cost := func(what string, want map[string]int) {
			t.Helper()
			for op, n := range want {
				if n == 0 {
					delete(want, op)
				}
			}
			if got := cnt.Ops(); !maps.Equal(got, want) {
				t.Errorf("%s cost %v; want %v (ALL_OLD returned: %v)", what, got, want, allOld)
			}
		}

		// A plain run's id taken.
		plain := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, plain); err != nil {
			t.Fatal(err)
		}
		cnt.Reset()
		err := rs.Create(ctx, plain)
		var found *RunExistsError
		if !errors.Is(err, ErrRunExists) || errors.As(err, &found) != allOld {
			t.Fatalf("create of a taken id: %v; want ErrRunExists, with the run exactly where the engine returns it", err)
		}
		if allOld && (found.Run.ID != plain.ID || found.Run.Status != StatusPending || found.Listed) {
			t.Fatalf("the run handed back: %+v", found)
		}
		cost("a plain create of a taken id", map[string]int{"PutItem": 1})

		failed := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
			t.Fatal(err)
		}

		// A retry's run written: the same Create again (its request run
		// again, its run id fixed).
		retry := NewRun("acme", "webhook", nil, now)
		retry.RetryOf = failed.ID
		if err := rs.Create(ctx, retry); err != nil {
			t.Fatal(err)
		}
		cnt.Reset()
		found = nil
		if err := rs.Create(ctx, retry); !errors.As(err, &found) || !errors.Is(err, ErrRunExists) {
			t.Fatalf("a retry's create again: %v; want a *RunExistsError", err)
		}
		if found.Run.ID != retry.ID || found.Run.RetryOf != failed.ID || !found.Listed {
			t.Fatalf("the retry's run handed back: %+v; want it, listed", found)
		}
		cost("a retry's create again", map[string]int{"UpdateItem": 1, "PutItem": 1, "GetItem": read})

		// A stranger at a retry's id: handed back, not listed.
		stranger := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, stranger); err != nil {
			t.Fatal(err)
		}
		clash := retry
		clash.ID = stranger.ID
		cnt.Reset()
		found = nil
		if err := rs.Create(ctx, clash); !errors.As(err, &found) {
			t.Fatalf("a retry whose id a stranger took: %v; want a *RunExistsError", err)
		}
		if found.Run.ID != stranger.ID || found.Run.RetryOf != "" || found.Listed {
			t.Fatalf("the stranger handed back: %+v; want it, not listed", found)
		}
		cost("a retry whose id a stranger took", map[string]int{"UpdateItem": 2, "PutItem": 1, "GetItem": read})
		f, err := rs.Get(ctx, failed.ID)
		if err != nil || !slices.Equal(f.Retries, []string{retry.ID}) {
			t.Fatalf("the failed run lists %v (%v); want its retry alone", f.Retries, err)
		}
	})
}
