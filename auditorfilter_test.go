package idemkit_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/host/stream"
	streammapping "github.com/idemkit/idemkit/functions/host/stream/mapping"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
)

// TestAuditorIdempotencyStreamIsFiltered: the auditor acts on MODIFY and
// REMOVE records of the idempotency table's Layer-1 records only
// (reclaims, TTL-expired pending records, cross-region key conflicts),
// never on an INSERT, which every keyed request's claim makes, nor on any
// record of a response's chunk item beside a record: the REMOVE of each
// (its TTL deletion at the record's retention end, or a failed
// completion's delete) carries its old image of up to 350 KB, and the
// auditor has nothing to do with it (RED_TEAM 343). Its stream mapping's
// filter, evaluated as Lambda does (functions/host/stream.Filter), hands
// over exactly those records.
func TestAuditorIdempotencyStreamIsFiltered(t *testing.T) {
	f, err := streammapping.Filter(idemkit.Template, "AuditorFunction", "IdempotencyStream")
	if err != nil {
		t.Fatal(err)
	}
	id := keyspace.ID("acme", "POST /runs", "key-1")
	record := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id},
		"state": &types.AttributeValueMemberS{Value: "completed"}, "expiresAt": &types.AttributeValueMemberN{Value: "1700000000"}}
	// A chunk item as idem/dynamostore writes it beside the record: its
	// key is the record's hash under the chunk prefix, its nonce and its
	// index.
	chunk := map[string]types.AttributeValue{
		"pk":        &types.AttributeValueMemberS{Value: "chunk:v1:" + id[len(keyspace.CallerPrefix):] + ":0123456789abcdef0123456789abcdef:0"},
		"data":      &types.AttributeValueMemberB{Value: make([]byte, 64)},
		"expiresAt": &types.AttributeValueMemberN{Value: "1700000000"}}
	if _, err := idemdynamo.DecodeItem(chunk); !errors.Is(err, idemdynamo.ErrNotRecord) {
		t.Fatalf("the chunk item decodes as a record (%v): the test's chunk key is not the store's", err)
	}
	for _, c := range []struct {
		what string
		rec  stream.StreamRecord
		want bool
	}{
		{"a record's claim (INSERT)", stream.StreamRecord{EventName: "INSERT", NewImage: record}, false},
		{"a record's completion or reclaim (MODIFY)", stream.StreamRecord{EventName: "MODIFY", OldImage: record, NewImage: record}, true},
		{"a record's TTL deletion", stream.StreamRecord{EventName: "REMOVE", OldImage: record, PrincipalID: stream.TTLPrincipal, IdentityType: "Service"}, true},
		{"a record's delete (another region's, forgotten)", stream.StreamRecord{EventName: "REMOVE", OldImage: record}, true},
		{"a chunk item's write (INSERT)", stream.StreamRecord{EventName: "INSERT", NewImage: chunk}, false},
		{"a chunk item's TTL deletion", stream.StreamRecord{EventName: "REMOVE", OldImage: chunk, PrincipalID: stream.TTLPrincipal, IdentityType: "Service"}, false},
		{"a chunk item's delete (a completion not applied)", stream.StreamRecord{EventName: "REMOVE", OldImage: chunk}, false},
	} {
		c.rec.Keys = map[string]types.AttributeValue{"pk": (c.rec.NewImage)["pk"]}
		if c.rec.NewImage == nil {
			c.rec.Keys["pk"] = c.rec.OldImage["pk"]
		}
		if got := f.Match(c.rec); got != c.want {
			t.Errorf("%s: handed to the auditor %t, want %t", c.what, got, c.want)
		}
	}
}
