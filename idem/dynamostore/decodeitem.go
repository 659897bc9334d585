package dynamostore

import (
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/keyspace"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
)

// ErrNotRecord is returned by DecodeItem for an item that is not a Layer-1
// record: an empty image or a response chunk item.
var ErrNotRecord = errors.New("dynamostore: not a Layer-1 record")

// DecodeItem decodes one IdempotencyTable item, such as a stream image, with
// the store's own decoder (stream consumers never mirror attribute names).
// The record's Response is set for a final record whose response is stored
// inline (one whose stored form fits in the record item's 1 KB beside the
// record's own attributes, about 600 bytes: a run API's 201 does); it is
// nil for a pending record and for a response stored in chunk items
// beside the record, which only a read of the chunk items reassembles. The record holds no raw key (its ID
// is keyspace.ID's hash).
func DecodeItem(m map[string]types.AttributeValue) (idem.Record, error) {
	st, ok := decode(m)
	if !ok || !keyspace.IsCaller(st.rec.ID) {
		return idem.Record{}, ErrNotRecord
	}
	rec := st.rec
	if rec.State.Final() && st.chunks == 0 && st.enc == "" && len(st.blob) > 0 {
		resp, err := unpackInline(st.blob)
		if err != nil {
			return idem.Record{}, fmt.Errorf("dynamostore: record %s: %w", logID(rec.ID), err)
		}
		rec.Response = resp
	}
	return rec, nil
}
