package dynamostore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
)

// ErrNotRecord is returned by DecodeRecord for an item of the effects table
// that is not a ledger record: a run reference (sk "run#<runId>", see
// Store.AddRunRef) or a recorded value kept beside its record. Stream
// consumers skip such items.
var ErrNotRecord = errors.New("dynamostore: item is not a ledger record")

// DecodeRecord decodes one item of the effects table, as read with GetItem
// or carried in a DynamoDB stream image (NewImage / OldImage), into the
// ledger record the Store wrote. An empty or nil item (the missing image of
// an INSERT or a REMOVE) decodes to (nil, nil). A run-reference item gives
// ErrNotRecord, and so does the item of a recorded value kept beside its
// record (sk "value#…"); such a record decodes with its Outcome.Value nil
// (the image does not hold it; Store.Get reads it). Times come back in UTC with the millisecond precision the
// store keeps; the TTL attribute expiresAt (seconds) is not read back,
// expiresAtMs is.
//
// It is the one decoder of the item shape: code reading the table or its
// stream outside this package (e.g. functions/auditor/conflictaudit's stream auditor)
// uses it instead of mirroring attribute names.
func DecodeRecord(av map[string]types.AttributeValue) (*ledger.Record, error) {
	if len(av) == 0 {
		return nil, nil
	}
	if sk, ok := av["sk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(sk.Value, refPrefix) {
		return nil, ErrNotRecord
	}
	if sk, ok := av["sk"].(*types.AttributeValueMemberS); !ok || sk.Value != sortKey {
		return nil, fmt.Errorf("%w: sort key is not %q", ErrNotRecord, sortKey)
	}
	return decode(av)
}

// EncodeRecord returns the item the Store writes for r (the inverse of
// DecodeRecord), e.g. to build stream images in tests: the compact layout
// (packed.go). DecodeRecord also reads records in the previous layout.
func EncodeRecord(r *ledger.Record) (map[string]types.AttributeValue, error) {
	if r == nil {
		return nil, errors.New("dynamostore: nil record")
	}
	return encodeItem(r), nil
}
