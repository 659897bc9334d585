package dynamostore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/itemsize"
	"github.com/idemkit/idemkit/ledger"
)

// A recorded value beside the record.
//
// DynamoDB bills a conditional write by item size even when its condition
// fails (the existing item's size, or the larger of the existing and the
// new item: AWS's guide has said both), so a duplicate's failed claim
// costs what the record weighs. A record item stays within recordItemMax
// (one write unit, by internal/itemsize, which counts its times and other
// numbers as DynamoDB Local stores them: RED_TEAM 578) by keeping a success's value beside it when the value
// would take it past that: the value is one item of its own under the
// record's partition (sk valuePrefix + attempt, owner and the value's
// SHA-256), written (unconditionally, with the record's retention) before
// the record write that references it, and read with one consistent
// GetItem whenever the store returns the record (a duplicate, Get,
// ListByRun, Scan). Such a record's packed attribute starts with
// packedVersionBeside and its top-level attribute valueRef names the value
// item; versions that predate it refuse the record (unknown version)
// rather than replay a success without its value. The value item has no
// runKey (it is not in the byRun index) and its sort key is not "record"
// (DecodeRecord and Scan skip it).
const (
	recordItemMax       = itemsize.WriteUnit
	packedVersionBeside = 2
	valuePrefix         = "value#"
	attrValueRef        = "valueRef"
	attrValueData       = "v"
)

// errValue is the cause of a value item that is missing or does not match
// its reference.
var errValue = errors.New("dynamostore: recorded value beside the record is missing or corrupt")

// errValueLapsed is fill's answer for a value item TTL deleted before its
// record: the item is absent and the record's retention ended at least
// valueTTLGrace ago (the value item's own TTL) on the wall clock. TTL
// deletes expired items lazily (typically within two days) and in any
// order, so such a record can linger without its value; it is past its
// retention, absent to every caller, and its readers (Get, Scan, so
// ListByRun) leave it out rather than fail. A value item missing from a
// record that is live, or lapsed less than that, is errValue: it was
// deleted by hand, and no success is replayed, nor the effect fired
// again, without its value.
var errValueLapsed = errors.New("dynamostore: the value item of a record past its retention was deleted by TTL")

// encodeWrite returns the record item of r and, when r's recorded value
// would take the item past recordItemMax, the value item to write first.
func encodeWrite(r *ledger.Record) (rec, value map[string]types.AttributeValue) {
	rec = encodeItem(r)
	o := r.Outcome
	if o == nil || len(o.Value) == 0 || itemsize.Of(rec) <= recordItemMax {
		return rec, nil
	}
	sum := sha256.Sum256(o.Value)
	ref := valuePrefix + strconv.Itoa(r.Attempt) + "#" + r.Owner + "#" + hex.EncodeToString(sum[:16])
	without := *r
	oc := *o
	oc.Value = nil
	without.Outcome = &oc
	rec = encodeItem(&without)
	packed := rec[PackedAttribute].(*types.AttributeValueMemberB).Value
	packed[0] = packedVersionBeside
	rec[attrValueRef] = &types.AttributeValueMemberS{Value: ref}
	value = map[string]types.AttributeValue{
		"pk":          rec["pk"],
		"sk":          &types.AttributeValueMemberS{Value: ref},
		attrValueData: &types.AttributeValueMemberB{Value: o.Value},
		"expiresAtMs": rec["expiresAtMs"],
		"expiresAt":   valueTTL(rec["expiresAt"]),
	}
	return rec, value
}

// valueTTLGrace is how much later than its record a value item's TTL
// deletes it: TTL deletes expired items lazily and in any order, and a
// record read whose value item went first cannot read the value. TTL
// typically deletes within two days, so the value may still go first;
// the record is then long past its retention, and reads leave it out
// (errValueLapsed). Every write of the record rewrites its value item, so
// the value always outlives the record.
const valueTTLGrace = 24 * time.Hour

// valueTTL is the value item's TTL attribute: the record's plus
// valueTTLGrace.
func valueTTL(recordTTL types.AttributeValue) types.AttributeValue {
	n, ok := recordTTL.(*types.AttributeValueMemberN)
	if !ok {
		return recordTTL
	}
	sec, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return recordTTL
	}
	return avN(sec + int64(valueTTLGrace/time.Second))
}

// valueRefOf is the value item a record item references ("" for none).
func valueRefOf(av map[string]types.AttributeValue) string {
	if s, ok := av[attrValueRef].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// putValue writes a value item (before the record write referencing it).
// Its key is unique to the attempt, owner and value, so a retried or
// repeated write rewrites the same bytes.
func (s *Store) putValue(ctx context.Context, value map[string]types.AttributeValue) error {
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: value}); err != nil {
		return fmt.Errorf("dynamostore: PutItem value: %w", err)
	}
	return nil
}

// fill sets r's recorded value from the value item av references, read
// consistently and checked against the reference's SHA-256 prefix.
func (s *Store) fill(ctx context.Context, r *ledger.Record, av map[string]types.AttributeValue) error {
	ref := valueRefOf(av)
	if r == nil || ref == "" || r.Outcome == nil {
		return nil
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": av["pk"], "sk": &types.AttributeValueMemberS{Value: ref}},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: GetItem value: %w", err)
	}
	v, ok := out.Item[attrValueData].(*types.AttributeValueMemberB)
	if !ok {
		if len(out.Item) == 0 && !clock.Before(r.ExpiresAt.Add(valueTTLGrace)) {
			return errValueLapsed
		}
		return fmt.Errorf("%w: %s", errValue, r.Key)
	}
	sum := sha256.Sum256(v.Value)
	if want := ref[len(ref)-32:]; hex.EncodeToString(sum[:16]) != want || !bytes.HasPrefix([]byte(ref), []byte(valuePrefix)) {
		return fmt.Errorf("%w: %s: checksum", errValue, r.Key)
	}
	r.Outcome.Value = v.Value
	return nil
}
