package dynamostore

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
)

// A value stored beside its record outlives the record by a day in the
// table's TTL: DynamoDB deletes expired items lazily and in any order, and
// a record read (Get, the witness, effects list) whose value item was
// deleted first would fail instead of reading the record as expired.
func TestValueItemOutlivesItsRecord(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	r := &ledger.Record{Key: "k", EffectID: "e", Owner: "o", Attempt: 1, State: ledger.StateCompleted,
		UpdatedAt: now, ExpiresAt: now.Add(ledger.MinRetention),
		Outcome: &ledger.Outcome{OK: true, Value: bytes.Repeat([]byte("x"), 4096)}}
	rec, value := encodeWrite(r)
	if value == nil {
		t.Fatal("a 4 KB value is not stored beside its record")
	}
	ttl := func(av map[string]types.AttributeValue) int64 {
		n, _ := strconv.ParseInt(av["expiresAt"].(*types.AttributeValueMemberN).Value, 10, 64)
		return n
	}
	if got, want := ttl(value)-ttl(rec), int64(24*time.Hour/time.Second); got != want {
		t.Fatalf("the value item's TTL is %d s after its record's, want %d", got, want)
	}
}
