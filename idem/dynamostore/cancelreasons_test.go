package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
)

// cancelling answers every TransactWriteItems with a cancellation giving
// reasons (a nil slice: none); the store calls nothing else here.
type cancelling struct {
	dynamostore.API
	reasons []types.CancellationReason
	items   int
}

func (c *cancelling) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.items = len(in.TransactItems)
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: c.reasons}
}

func reasons(codes ...string) []types.CancellationReason {
	out := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		out[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return out
}

// A cancelled completion names the write whose condition failed only when
// the cancellation reasons are one per item, the record's Put first, as
// DynamoDB gives them: a list of another length (an engine that lists
// fewer, or none) cannot say which item failed, so the error is a
// *WriteConflictError with Index -1 when some condition failed (no cause
// is asked, the Guard answers its own 500 and releases the record), never
// a fence (a 409 that leaves the record pending) or another write's index.
func TestCancellationReasonsAttributedOnlyWhenOnePerItem(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	id := keyspace.ID("acme", "POST /orders", "k_cancel_reasons_0123456789")
	claim := idem.Record{ID: id, Digest: "d", State: idem.StatePending, Owner: "owner-1", Attempt: 1,
		LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("Business"),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}}}
	ccf, none := "ConditionalCheckFailed", "None"
	for _, tc := range []struct {
		name    string
		reasons []types.CancellationReason
		index   int // -2: not a write conflict
		fenced  bool
	}{
		{"one per item, second write", reasons(none, none, ccf), 1, false},
		{"one per item, the record", reasons(ccf, none, ccf), -2, true},
		{"only the failed item listed", reasons(ccf), -1, false},
		{"one short", reasons(none, ccf), -1, false},
		{"none", nil, -2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cancelling{reasons: tc.reasons}
			s, err := dynamostore.New(dynamostore.Config{Client: c, Table: "IdempotencyTable"})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Complete(context.Background(), claim, idem.Outcome{State: idem.StateCompleted,
				Response: &idem.Response{Status: 201}, Expires: now.Add(time.Hour), Writes: []any{put, put}}, now)
			if c.items != 3 {
				t.Fatalf("the transaction held %d items, want 3", c.items)
			}
			if got := errors.Is(err, idem.ErrFenced); got != tc.fenced {
				t.Fatalf("Complete = %v: fenced %t, want %t", err, got, tc.fenced)
			}
			var wc *idem.WriteConflictError
			switch {
			case tc.index == -2:
				if errors.As(err, &wc) {
					t.Fatalf("Complete = %v, want no write conflict", err)
				}
			case !errors.As(err, &wc) || wc.Index != tc.index:
				t.Fatalf("Complete = %v, want a *WriteConflictError with Index %d", err, tc.index)
			}
		})
	}
}
