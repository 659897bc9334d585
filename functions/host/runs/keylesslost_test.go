package runs

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestKeylessRetryWhoseEveryAnswerWasLost: a keyless retry's transaction
// (createListed: its run and its listing on the failed run) that landed
// while every answer of it was lost (lost, then throttled or lost until
// the SDK gave up) is answered with the run at its id, as a lost answer's
// cancelled retry is (RED_TEAM 524); before, the call was an error while
// the run stood listed, for the executor to start, and the keyless
// client's next try made a second retry. Throttled on every try, nothing
// is written and the call is an error.
func TestKeylessRetryWhoseEveryAnswerWasLost(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs, faults, _, failed, now := keylessFixture(t, e)
		for _, c := range []struct {
			name    string
			arm     func()
			applied bool
		}{
			{"lost then throttled", func() {
				faults.FailNextAfterSend("TransactWriteItems", 1, dynamotest.ResponseLost())
				faults.FailNext("TransactWriteItems", 2, dynamotest.Throttle())
			}, true},
			{"lost on every try", func() { faults.FailNextAfterSend("TransactWriteItems", 3, dynamotest.ResponseLost()) }, true},
			{"throttled on every try", func() { faults.FailNext("TransactWriteItems", 3, dynamotest.Throttle()) }, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := NewRun("acme", "webhook", nil, now)
				r.RetryOf = failed.ID
				c.arm()
				err := rs.Create(ctx, r)
				faults.Clear()
				var taken *RunExistsError
				switch {
				case c.applied && !(errors.As(err, &taken) && taken.Run.ID == r.ID && taken.Run.RetryOf == failed.ID):
					t.Fatalf("the retry landed, its answers lost: %v; want its run found at its id", err)
				case !c.applied && (err == nil || errors.Is(err, ErrRunExists)):
					t.Fatalf("a retry throttled on every try: %v, want an error", err)
				}
				_, gerr := rs.Get(ctx, r.ID)
				f, _ := rs.Get(ctx, failed.ID)
				if c.applied != (gerr == nil) || c.applied != slices.Contains(f.Retries, r.ID) {
					t.Fatalf("stored: run %v, listed %v; want both %v", gerr, slices.Contains(f.Retries, r.ID), c.applied)
				}
			})
		}
	})
}
