package dynamostore_test

import (
	"bytes"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
)

// TestInlineMarkIsOneWriteUnitOnTheEngine (RED_TEAM 578): the largest
// response the store keeps inline makes a record item of at most 1,024
// bytes as DynamoDB Local and dynalite bill it (dynamotest.EngineItemSize;
// on moto, which bills nothing, by itemsize), so its replays are billed
// one write unit, when the record's retention in milliseconds ends in one
// zero (expiresAtMs 1796688000010: twelve significant digits from 10^12,
// eight bytes, where the approximate count of AWS's guide gives seven). The
// response a byte larger is kept beside the record, and the inline one
// replays byte-exactly; so does a response a byte larger inline, as the
// store wrote it before (a record item of 1,025 bytes on those engines).
func TestInlineMarkIsOneWriteUnitOnTheEngine(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		v.now = time.Date(2026, 12, 7, 0, 0, 0, 10e6, time.UTC) // retention 24 h on: ...000010 ms
		// complete stores a response of n incompressible body bytes under
		// a new key and returns the key and whether it was kept inline.
		complete := func(n int) (string, bool) {
			id := newID()
			v.claim(t, pending(id, "o1", v.now), v.now, idem.Claimed)
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), outcome(body(n), v.now), v.now); err != nil {
				t.Fatal(err)
			}
			return id, v.raw(t, id)["resp"] != nil
		}
		lo, hi := 100, 1024 // lo kept inline, hi not
		if _, in := complete(lo); !in {
			t.Fatalf("a %d-byte response is not kept inline", lo)
		}
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; func() bool { _, in := complete(mid); return in }() {
				lo = mid
			} else {
				hi = mid
			}
		}
		id, _ := complete(lo)
		item := v.raw(t, id)
		size, err := dynamotest.EngineItemSize(ctxT(t), e.Client(), v.table, item, "pk")
		if errors.Is(err, dynamotest.ErrNoCapacity) {
			size, err = itemsize.Of(item), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("largest inline response: %d body bytes, record item %d bytes on %s (%d by itemsize)", lo, size, e.Kind, itemsize.Of(item))
		if size > itemsize.WriteUnit {
			t.Errorf("the record item of the largest inline response (%d body bytes) is %d bytes on %s, more than one write unit (%d)", lo, size, e.Kind, itemsize.WriteUnit)
		}
		rec := v.claim(t, pending(id, "o2", v.now), v.now, idem.Exists)
		if rec.Response == nil || !bytes.Equal(rec.Response.Body, body(lo)) {
			t.Fatal("the inline response does not replay byte-exactly")
		}

		// A record the store wrote before its count followed the engines:
		// with these times that count kept a response a byte larger
		// inline, an item of 1,025 bytes on them (the body ends the
		// stored blob). It replays byte-exactly.
		if _, in := complete(lo + 1); in {
			t.Fatalf("a %d-byte response, over the mark, is kept inline", lo+1)
		}
		old := maps.Clone(item)
		oldID := newID()
		old["pk"] = s(oldID)
		old["resp"] = &types.AttributeValueMemberB{Value: append(bytes.Clone(item["resp"].(*types.AttributeValueMemberB).Value), body(lo + 1)[lo])}
		if _, err := e.Client().PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(v.table), Item: old}); err != nil {
			t.Fatal(err)
		}
		if size, err := dynamotest.EngineItemSize(ctxT(t), e.Client(), v.table, old, "pk"); err == nil && size <= itemsize.WriteUnit {
			t.Errorf("the record as written before is %d bytes on %s: not the record the previous count let over 1 KB", size, e.Kind)
		}
		rec = v.claim(t, pending(oldID, "o2", v.now), v.now, idem.Exists)
		if rec.Response == nil || rec.Response.Status != 201 || !bytes.Equal(rec.Response.Body, body(lo+1)) {
			t.Fatal("a record written before, over 1 KB on the engines, does not replay byte-exactly")
		}
	})
}
