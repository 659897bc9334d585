package runs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// beforeRunWrite is a client option that calls fn just before each write
// of a run's item to table is sent: a PutItem of a run, or a
// TransactWriteItems holding a Put of one (a cancel's marker, a scope
// item or a tombstone is no run).
func beforeRunWrite(table string, fn func()) func(*dynamodb.Options) {
	isRun := func(tb *string, item map[string]types.AttributeValue) bool {
		_, ok := RunFromItem(item)
		return ok && tb != nil && *tb == table
	}
	return dynamotest.BeforeSend(func(in any) {
		run := false
		switch p := in.(type) {
		case *dynamodb.PutItemInput:
			run = isRun(p.TableName, p.Item)
		case *dynamodb.TransactWriteItemsInput:
			for _, it := range p.TransactItems {
				run = run || (it.Put != nil && isRun(it.Put.TableName, it.Put.Item))
			}
		}
		if run {
			fn()
		}
	})
}

// TestKeylessRetryCancelledWhileListed: a retry created outside a
// Layer-1 claim (a retry request sent without an Idempotency-Key) is
// never listed on its failed run while its run is unwritten and live to
// be written later: a client that reads the failed run's retries at the
// moment the run's write is sent, and cancels each id listed, stops that
// run. Under the completion transaction (the deployed default) the
// listing and the run's write were two writes, as without it, and a
// cancel between them was answered not found (no marker is written
// there) while the run was then written pending, for the executor to
// start; they are now one TransactWriteItems, so the id is listed only
// with its run. Without the transaction the cancel's marker (RED_TEAM
// 345) still makes the run be written cancelled. The create costs one
// TransactWriteItems under the transaction (it was an UpdateItem and a
// PutItem), the listing and the PutItem without it. On every engine, in
// each write mode it has.
func TestKeylessRetryCancelledWhileListed(t *testing.T) {
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		ctx := context.Background()
		live := []Status{StatusPending, StatusRunning}
		now := time.Now().UTC().Truncate(time.Millisecond)
		table := e.CreateTable(t, "RunsTable")
		plain := &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: table, Transactional: transactional}
		failed := NewRun("acme", "webhook", nil, now)
		if err := plain.Create(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := plain.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
			t.Fatal(err)
		}
		retry := NewRun("acme", "webhook", nil, now)
		retry.RetryOf = failed.ID

		// The client reading the failed run and cancelling the retry once
		// it is listed, at the moment a write of its run is sent.
		var cancels []error
		hook := func() {
			f, err := plain.Get(ctx, failed.ID)
			if err != nil {
				t.Error(err)
				return
			}
			if len(cancels) == 0 && slices.Contains(f.Retries, retry.ID) {
				_, err := plain.Cancel(ctx, retry.ID, live, "once:client", "", now)
				cancels = append(cancels, err)
			}
		}
		cnt := dynamotest.NewCounter()
		rs := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, beforeRunWrite(table, hook), cnt.Middleware()), Table: table, Transactional: transactional}
		err := rs.Create(ctx, retry) // no claim in ctx: keyless
		var found *RunExistsError
		if err != nil && !errors.As(err, &found) {
			t.Fatalf("the keyless retry's create: %v", err)
		}
		got, gerr := plain.Get(ctx, retry.ID)
		if gerr != nil {
			t.Fatalf("the retry's run: %v", gerr)
		}
		if len(cancels) > 0 && got.Status != StatusCancelled {
			t.Fatalf("a cancel made while the retry was listed answered %v, and its run was then written %s: a cancelled retry starts", cancels, got.Status)
		}
		switch {
		case transactional && (len(cancels) != 0 || err != nil):
			t.Fatalf("under the transaction the id was listed before its run's write was sent (cancels %v, create %v)", cancels, err)
		case !transactional && (len(cancels) != 1 || !errors.Is(cancels[0], ErrRunNotFound) || found == nil || !found.Listed || found.Run.Status != StatusCancelled):
			t.Fatalf("without the transaction: cancels %v, create %v; want one cancel not found and the run written cancelled by it", cancels, err)
		}
		if got.Status == StatusPending {
			// Listed with its run: a cancel now finds and stops it.
			if r, err := plain.Cancel(ctx, retry.ID, live, "once:client", "", now); err != nil || r.Status != StatusCancelled {
				t.Fatalf("a cancel of the listed retry: %+v %v", r, err)
			}
		}
		if f, _ := plain.Get(ctx, failed.ID); !slices.Equal(f.Retries, []string{retry.ID}) {
			t.Fatalf("the failed run lists %v", f.Retries)
		}

		// The create's cost, with nothing in between.
		other := NewRun("acme", "webhook", nil, now)
		other.RetryOf = failed.ID
		cnt.Reset()
		if err := rs.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"UpdateItem": 1, "PutItem": 1}
		if transactional {
			want = map[string]int{"TransactWriteItems": 1}
		}
		if got := cnt.Ops(); !maps.Equal(got, want) {
			t.Errorf("a keyless retry's create cost %v; want %v", got, want)
		}
	})
}

// TestKeylessRetryTransactionRefusals: the one TransactWriteItems of a
// keyless retry under the transaction (RED_TEAM 369) applied with its
// answer lost is retried by the SDK into the run there, which is this
// create's own (nil, or a *RunExistsError holding it, not Listed: the
// cancelled try listed nothing), written and listed once; a retry of a
// failed run gone is an error that writes nothing; one cancelled by
// another transaction alone is sent again, up to listedTries sends. On every
// engine with transactions.
func TestKeylessRetryTransactionRefusals(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs, faults, _, failed, now := keylessFixture(t, e)
		retry := NewRun("acme", "webhook", nil, now)
		retry.RetryOf = failed.ID
		faults.FailNextAfterSend("TransactWriteItems", 1, dynamotest.ResponseLost())
		err := rs.Create(ctx, retry)
		var found *RunExistsError
		if err != nil && (!errors.As(err, &found) || found.Listed || found.Run.RetryOf != failed.ID || !found.Run.CreatedAt.Equal(now)) {
			t.Fatalf("the create whose answer was lost: %v (%+v); want nil or the run there, not listed by the retried try", err, found)
		}
		if faults.Pending() != 0 {
			t.Fatal("the lost answer never happened")
		}
		if got, err := rs.Get(ctx, retry.ID); err != nil || got.Status != StatusPending || got.Version != 1 {
			t.Fatalf("the run: %+v %v", got, err)
		}
		if f, _ := rs.Get(ctx, failed.ID); !slices.Equal(f.Retries, []string{retry.ID}) {
			t.Fatalf("the failed run lists %v", f.Retries)
		}

		// Cancelled by another transaction on the failed run (DynamoDB's
		// TransactionConflict, which no emulator here gives on its own):
		// sent again after a jittered wait, up to listedTries sends in all
		// (TestKeylessRetryConflictBackoff); nothing written by a
		// cancelled one.
		conflict := func() error {
			return &types.TransactionCanceledException{Message: aws.String("conflict"), CancellationReasons: []types.CancellationReason{
				{Code: aws.String("None")}, {Code: aws.String("TransactionConflict")}}}
		}
		for _, c := range []struct {
			conflicts int
			written   bool
		}{{listedTries - 1, true}, {listedTries, false}} {
			r := NewRun("acme", "webhook", nil, now)
			r.RetryOf = failed.ID
			faults.FailNext("TransactWriteItems", c.conflicts, conflict())
			err := rs.Create(ctx, r)
			if faults.Pending() != 0 {
				t.Fatalf("%d conflicts armed, not all met", c.conflicts)
			}
			_, gerr := rs.Get(ctx, r.ID)
			f, _ := rs.Get(ctx, failed.ID)
			if c.written && (err != nil || gerr != nil || !slices.Contains(f.Retries, r.ID)) {
				t.Fatalf("after %d conflicts: %v, run %v, listed %v; want written and listed", c.conflicts, err, gerr, slices.Contains(f.Retries, r.ID))
			}
			if !c.written && (err == nil || !errors.Is(gerr, ErrRunNotFound) || slices.Contains(f.Retries, r.ID)) {
				t.Fatalf("after %d conflicts: %v, run %v, listed %v; want an error and nothing written", c.conflicts, err, gerr, slices.Contains(f.Retries, r.ID))
			}
		}

		orphan := NewRun("acme", "webhook", nil, now)
		orphan.RetryOf = NewRunID("acme")
		if err := rs.Create(ctx, orphan); err == nil || errors.Is(err, ErrRunExists) || errors.Is(err, ErrRetryLimit) {
			t.Fatalf("a retry of a failed run gone: %v, want an error", err)
		}
		if _, err := rs.Get(ctx, orphan.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a retry of a failed run gone was written: %v", err)
		}
	})
}
