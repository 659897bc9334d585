package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestValueMarkIsOneWriteUnitOnTheEngine (RED_TEAM 578): the largest
// recorded value the store keeps inside its record makes a record item of
// at most 1,024 bytes as DynamoDB Local and dynalite bill it
// (dynamotest.EngineItemSize; on moto, which bills nothing, by itemsize),
// so a duplicate's failed claim is billed one write unit, when the
// record's times in milliseconds (its lease and its retention) end in one
// zero: twelve significant digits from 10^12, eight bytes each, where the
// approximate count of AWS's guide gives seven. A value a byte larger is
// kept beside the record, and the inline one is replayed; so is a value
// two bytes larger inside its record, as the store wrote it before (a
// record item of 1,026 bytes on those engines).
func TestValueMarkIsOneWriteUnitOnTheEngine(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		client := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		st := newStore(t, client, table)
		clk := ledgertest.NewClock(time.Date(2026, 12, 7, 0, 0, 0, 10e6, time.UTC))
		l, err := ledger.New(ledger.Config{Store: st, Test: ledger.TestConfig{Clock: clk}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		value := func(n int) []byte {
			b := make([]byte, n)
			_, _ = rand.NewChaCha8([32]byte{'m', 'a', 'r', 'k'}).Read(b)
			return b
		}
		// do records a value of n bytes under a new effect and returns the
		// record item and whether the value is inside it.
		seq := 0
		do := func(n int) (ledger.Effect, map[string]types.AttributeValue, bool) {
			seq++
			eff := business(t, fmt.Sprintf("mark-%d", seq))
			_, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { return value(n), nil })
			if err != nil {
				t.Fatal(err)
			}
			out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "effect#" + eff.Identity.EffectID}, "sk": &types.AttributeValueMemberS{Value: "record"}}})
			if err != nil || out.Item == nil {
				t.Fatalf("record item: %v", err)
			}
			return eff, out.Item, out.Item["valueRef"] == nil
		}
		lo, hi := 100, 1024 // lo kept inside, hi beside
		if _, _, in := do(lo); !in {
			t.Fatalf("a %d-byte value is kept beside its record", lo)
		}
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; func() bool { _, _, in := do(mid); return in }() {
				lo = mid
			} else {
				hi = mid
			}
		}
		eff, item, _ := do(lo)
		size, err := dynamotest.EngineItemSize(ctx, client, table, item, "pk", "sk")
		if errors.Is(err, dynamotest.ErrNoCapacity) {
			size, err = itemsize.Of(item), nil
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("largest value inside its record: %d bytes, record item %d bytes on %s (%d by itemsize; leaseUntil %v, expiresAtMs %v)",
			lo, size, e.Kind, itemsize.Of(item), item["leaseUntil"], item["expiresAtMs"])
		if size > itemsize.WriteUnit {
			t.Errorf("the record item of the largest value kept inside it (%d bytes) is %d bytes on %s, more than one write unit (%d)", lo, size, e.Kind, itemsize.WriteUnit)
		}
		dup := func(eff ledger.Effect, want []byte) {
			t.Helper()
			r, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { t.Error("fired twice"); return nil, nil })
			if err != nil || !r.Replayed || !bytes.Equal(r.Value, want) {
				t.Fatalf("duplicate: %v, replayed %t, value intact %t", err, r.Replayed, bytes.Equal(r.Value, want))
			}
		}
		dup(eff, value(lo))

		// A record the store wrote before its count followed the engines:
		// with these times that count kept a value two bytes larger
		// inside its record, an item of 1,026 bytes on them. Its
		// duplicate replays the value as before.
		eff, item, in := do(lo + 2)
		if in {
			t.Fatalf("a %d-byte value, over the mark, is kept inside its record", lo+2)
		}
		rec, err := st.Get(ctx, "effect#"+eff.Identity.EffectID)
		if err != nil || rec == nil {
			t.Fatalf("Get: %v", err)
		}
		old := dynamostore.EncodeInline(rec)
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: old}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": item["pk"], "sk": item["valueRef"]}}); err != nil {
			t.Fatal(err)
		}
		if size, err := dynamotest.EngineItemSize(ctx, client, table, old, "pk", "sk"); err == nil && size <= itemsize.WriteUnit {
			t.Errorf("the record as written before is %d bytes on %s: not the record the previous count let over 1 KB", size, e.Kind)
		}
		dup(eff, value(lo+2))
	})
}
