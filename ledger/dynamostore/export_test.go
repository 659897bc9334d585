package dynamostore

import (
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
)

// EncodePreviousLayout returns r as the previous layout stored it (one
// attribute per field, attempts a list of maps), for tests that such
// records are still read and handled.
func EncodePreviousLayout(r *ledger.Record) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(toItem(r))
}

// EncodeInline returns r's record item with its recorded value inside it
// whatever the item's size, as the store wrote a record whose value it
// counted within the 1 KB mark before that count followed the engines
// (RED_TEAM 578): tests check such records are still read.
func EncodeInline(r *ledger.Record) map[string]types.AttributeValue { return encodeItem(r) }
