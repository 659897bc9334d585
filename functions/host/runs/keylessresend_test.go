package runs

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestKeylessRetryRefusalIsNeverResent: a keyless retry's transaction
// (createListed) is sent again only when a conflict with another
// transaction alone cancelled it. Cancelled by a failed condition (the id
// taken, the listing refused), with or without a conflict beside it, by
// any other reason, or with no reason per write, it is sent once: the
// refusal is answered as a refusal (or an error), never retried into a
// write, and nothing is written, with no wait asked for (RED_TEAM 379).
// Three cancellations are armed each time; a resend would take a second.
func TestKeylessRetryRefusalIsNeverResent(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs, faults, w, failed, now := keylessFixture(t, e)
		code := func(cs ...string) []types.CancellationReason {
			var out []types.CancellationReason
			for _, c := range cs {
				out = append(out, types.CancellationReason{Code: aws.String(c)})
			}
			return out
		}
		for name, reasons := range map[string][]types.CancellationReason{
			"the listing's condition":              code("None", "ConditionalCheckFailed"),
			"the listing's condition and conflict": code("TransactionConflict", "ConditionalCheckFailed"),
			"the put's condition and conflict":     code("ConditionalCheckFailed", "TransactionConflict"),
			"throttled and conflict":               code("ThrottlingError", "TransactionConflict"),
			"a validation error":                   code("ValidationError", "None"),
			"no reason per write":                  nil,
			"no conflict named":                    code("None", "None"),
		} {
			t.Run(name, func(t *testing.T) {
				r := NewRun("acme", "webhook", nil, now)
				r.RetryOf = failed.ID
				faults.FailNext("TransactWriteItems", 3, &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: reasons})
				defer faults.Clear()
				err := rs.Create(ctx, r)
				if p := faults.Pending(); p != 2 {
					t.Fatalf("the transaction was sent %d times, want once", 3-p)
				}
				if got := w.take(); len(got) != 0 {
					t.Fatalf("waits %v asked for, want none: the refusal is not sent again", got)
				}
				if err == nil {
					t.Fatal("a cancelled transaction answered as written")
				}
				if _, gerr := rs.Get(ctx, r.ID); !errors.Is(gerr, ErrRunNotFound) {
					t.Fatalf("a run was written: %v", gerr)
				}
				if f, _ := rs.Get(ctx, failed.ID); slices.Contains(f.Retries, r.ID) {
					t.Fatal("the id was listed")
				}
			})
		}
	})
}

// TestKeylessRetryLostAnswerAtTheCap: a keyless retry whose transaction
// landed with its answer lost, listing its id as the failed run's last
// under the cap, and whose next sends meet racing retries' conflicts, is
// answered with the run it wrote (its id found taken by its own run,
// which the handler answers 201), never the cap's refusal, and its id is
// listed once.
func TestKeylessRetryLostAnswerAtTheCap(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs, faults, _, failed, now := keylessFixture(t, e)
		for range MaxRetries - 1 {
			if err := rs.LinkRetry(ctx, failed.ID, NewRunID("acme")); err != nil {
				t.Fatal(err)
			}
		}
		r := NewRun("acme", "webhook", nil, now)
		r.RetryOf = failed.ID
		faults.FailNextAfterSend("TransactWriteItems", 1, dynamotest.ResponseLost())
		faults.FailNext("TransactWriteItems", listedTries-1, &types.TransactionCanceledException{Message: aws.String("conflict"),
			CancellationReasons: []types.CancellationReason{{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}}})
		err := rs.Create(ctx, r)
		if faults.Pending() != 0 {
			t.Fatal("not every armed fault was met")
		}
		var found *RunExistsError
		if !errors.As(err, &found) || found.Run.ID != r.ID || !found.Run.CreatedAt.Equal(now) {
			t.Fatalf("the create: %v, want the run it wrote found there", err)
		}
		f, _ := rs.Get(ctx, failed.ID)
		if len(f.Retries) != MaxRetries || !slices.Contains(f.Retries, r.ID) {
			t.Fatalf("the failed run lists %d ids, ours %v", len(f.Retries), slices.Contains(f.Retries, r.ID))
		}
	})
}

// TestKeylessRetryLostAnswerThenConflictsOut: a keyless retry whose
// transaction landed with its answer lost, and whose every later send
// met racing retries' conflicts until createListed gave up, is answered
// with the run it wrote (its id found taken by its own run, which the
// handler answers 201), not a 503 that tells its client to send again
// into a second run; one read of the id, on that path only. With nothing
// written there, the error stays the conflict's.
func TestKeylessRetryLostAnswerThenConflictsOut(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs, faults, _, failed, now := keylessFixture(t, e)
		conflict := &types.TransactionCanceledException{Message: aws.String("conflict"),
			CancellationReasons: []types.CancellationReason{{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}}}

		r := NewRun("acme", "webhook", nil, now)
		r.RetryOf = failed.ID
		faults.FailNextAfterSend("TransactWriteItems", 1, dynamotest.ResponseLost())
		faults.FailNext("TransactWriteItems", listedTries, conflict)
		err := rs.Create(ctx, r)
		if faults.Pending() != 0 {
			t.Fatal("not every armed fault was met")
		}
		var found *RunExistsError
		if !errors.As(err, &found) || found.Run.ID != r.ID || !found.Run.CreatedAt.Equal(now) || found.Run.Status != StatusPending {
			t.Fatalf("the create: %v, want the run it wrote found there", err)
		}
		if f, _ := rs.Get(ctx, failed.ID); !slices.Equal(f.Retries, []string{r.ID}) {
			t.Fatalf("the failed run lists %v", f.Retries)
		}

		other := NewRun("acme", "webhook", nil, now)
		other.RetryOf = failed.ID
		faults.FailNext("TransactWriteItems", listedTries, conflict)
		err = rs.Create(ctx, other)
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || errors.Is(err, ErrRunExists) {
			t.Fatalf("conflicts out with nothing written: %v, want the conflict", err)
		}
		if _, gerr := rs.Get(ctx, other.ID); !errors.Is(gerr, ErrRunNotFound) {
			t.Fatalf("a run was written: %v", gerr)
		}
	})
}
