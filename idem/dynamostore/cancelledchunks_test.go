package dynamostore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCancelledTransactionLeavesNoChunks: a transactional completion
// whose one send DynamoDB cancelled for a reason that passes (a
// conflicting transaction, throttling: its caller may try again), or for
// a reason that names no failed condition, applied nothing, so the
// chunk items written for its response are deleted, as a fenced or
// conflicting completion's are. Before, they stayed, referenced by
// nothing: under a retention of forever (no TTL on them), for good. A
// later completion by the same owner is then replayed exactly, with its
// own chunks only. (RED_TEAM 548)
func TestCancelledTransactionLeavesNoChunks(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		now := v.now
		body := incompressible(t, 1<<20) // three chunk items
		for i, c := range []struct {
			name  string
			codes []string
			want  func(error) bool
		}{
			{"conflicting transaction", []string{"None", "TransactionConflict"}, func(err error) bool { return errors.Is(err, idem.ErrStoreUnavailable) }},
			{"throttled", []string{"ThrottlingError", "None"}, func(err error) bool { return errors.Is(err, idem.ErrStoreUnavailable) }},
			{"reasons not one per item", []string{"TransactionConflict"}, func(err error) bool { return err != nil }},
			{"validation", []string{"None", "ValidationError"}, func(err error) bool { return err != nil && !errors.Is(err, idem.ErrStoreUnavailable) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := newID()
				v.claim(t, pending(id, "o1", now), now, idem.Claimed)
				before := v.chunkItems(t)
				out := finalOf(bodyResponse(body), now)
				out.Expires = time.Time{} // kept forever: its chunk items carry no TTL
				out.Writes = []any{businessPut(biz, "run-"+string(rune('a'+i)))}
				v.f.FailNext("TransactWriteItems", 1, transactionCancelled(c.codes...))
				err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now)
				v.f.Clear()
				if !c.want(err) {
					t.Fatalf("Complete = %v", err)
				}
				if n := v.chunkItems(t) - before; n != 0 {
					t.Fatalf("%d chunk items left by a cancelled completion, want none", n)
				}
				if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now); err != nil {
					t.Fatalf("the owner's next completion: %v", err)
				}
				if n := v.chunkItems(t) - before; n != 3 {
					t.Fatalf("%d chunk items after the completion, want 3", n)
				}
				v.wantExact(t, id, "o2", now, bodyResponse(body))
			})
		}
	})
}
