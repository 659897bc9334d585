package dynamostore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRefusedCompletionLeavesNoChunks: a completion DynamoDB refused as a
// request on its only send (a ValidationException: a handler's business
// writes naming one item twice, which the engine refuses before applying
// anything; or the record's own PutItem so refused) applied nothing, so
// the chunk items written for its response are deleted, as a cancelled
// transaction's are (548). Before (RED_TEAM 566), they stayed, referenced
// by nothing: under a retention of forever (no TTL on them), for good,
// a new set at each retry of a request whose writes the engine refuses.
// The owner's next completion is then replayed exactly.
func TestRefusedCompletionLeavesNoChunks(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		now := v.now
		body := incompressible(t, 1<<20) // three chunk items
		for i, name := range []string{"business writes naming one item twice", "the record's put refused"} {
			t.Run(name, func(t *testing.T) {
				id := newID()
				v.claim(t, pending(id, "o1", now), now, idem.Claimed)
				before := v.chunkItems(t)
				out := finalOf(bodyResponse(body), now)
				out.Expires = time.Time{} // kept forever: its chunk items carry no TTL
				item := "run-refused-" + string(rune('a'+i))
				if i == 0 {
					out.Writes = []any{businessPut(biz, item), businessPut(biz, item)}
				} else {
					v.f.FailNextIf("PutItem", 1, &smithy.GenericAPIError{Code: "ValidationException", Message: "injected refusal"},
						func(in any) bool { return isRecordPut(in) })
				}
				err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now)
				v.f.Clear()
				if err == nil || errors.Is(err, idem.ErrStoreUnavailable) {
					t.Fatalf("Complete = %v, want the refusal", err)
				}
				if n := v.chunkItems(t) - before; n != 0 {
					t.Fatalf("%d chunk items left by a refused completion, want none", n)
				}
				out.Writes = nil
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

// isRecordPut reports whether in is the completion's PutItem of the
// record (conditional on its owner), not a chunk item's (unconditional).
func isRecordPut(in any) bool {
	p, ok := in.(*dynamodb.PutItemInput)
	return ok && p.ConditionExpression != nil
}
