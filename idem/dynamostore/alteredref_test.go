package dynamostore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestAlteredChunkReferenceIsCorruption: a completed record whose
// reference to its chunk items is altered (a chunk count or length that
// is negative, far beyond what a response can take, or a count the
// length does not need) is a corruption error on every replay and read,
// before any chunk is read: never a crash of the process (a negative
// count or length panicked in make and bytes.Buffer.Grow), never an
// allocation sized by the altered number, never thousands of batch
// reads for a count no completion writes. (RED_TEAM 547)
func TestAlteredChunkReferenceIsCorruption(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		now := v.now
		body := incompressible(t, 1<<20) // three chunk items
		for _, c := range []struct{ name, attr, value string }{
			{"negative count", "respChunks", "-1"},
			{"huge count", "respChunks", "1099511627776"},
			{"count the length does not need", "respChunks", "100000"},
			{"negative length", "respLen", "-1"},
			{"huge length", "respLen", "1099511627776"},
		} {
			t.Run(c.name, func(t *testing.T) {
				id := newID()
				v.claim(t, pending(id, "o1", now), now, idem.Claimed)
				if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), finalOf(bodyResponse(body), now), now); err != nil {
					t.Fatal(err)
				}
				it := v.raw(t, id)
				if _, ok := it["respChunks"]; !ok {
					t.Fatal("the response is not in chunk items")
				}
				it[c.attr] = &types.AttributeValueMemberN{Value: c.value}
				v.put(t, it)
				corrupt := func(err error) bool {
					return err != nil && strings.Contains(err.Error(), "corrupt") && !errors.Is(err, idem.ErrNotKept)
				}
				v.cnt.Reset()
				res, err := v.s.Claim(ctxT(t), pending(id, "o2", now), now)
				if !corrupt(err) || res.Record.Response != nil {
					t.Fatalf("Claim = %v with %v, want a corruption error and no response", res.Decision, err)
				}
				if n := v.cnt.Ops()["BatchGetItem"]; n != 0 {
					t.Fatalf("Claim read chunks %d times, want none", n)
				}
				if _, _, err := v.s.Get(ctxT(t), id, now); !corrupt(err) {
					t.Fatalf("Get = %v, want a corruption error", err)
				}
			})
		}
	})
}
