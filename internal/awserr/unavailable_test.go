package awserr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func cancelled(codes ...string) error {
	rs := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		rs[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: rs}
}

// TestUnavailableTransactions: a write refused because a transaction holds
// its item (TransactionConflictException), and a transaction cancelled only
// for reasons that pass (throttling, capacity, a conflicting transaction),
// did not apply and may be retried later: unavailable, so the caller
// answers 503 with Retry-After, not 500. A transaction cancelled for a
// failed condition or a validation error, or with no reasons, is not.
func TestUnavailableTransactions(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"conflict", &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}, true},
		{"conflict wrapped", fmt.Errorf("put: %w", &types.TransactionConflictException{}), true},
		{"another Region's write", &types.ReplicatedWriteConflictException{Message: aws.String("the item is being modified by a request in another Region")}, true},
		{"another Region's write wrapped", fmt.Errorf("put: %w", &types.ReplicatedWriteConflictException{}), true},
		{"throttled item", cancelled("None", "ThrottlingError"), true},
		{"capacity", cancelled("ProvisionedThroughputExceeded", "None"), true},
		{"conflicting transaction", cancelled("TransactionConflict", "None"), true},
		{"request limit", cancelled("None", "RequestLimitExceeded"), true},
		{"a condition failed", cancelled("ConditionalCheckFailed", "ThrottlingError"), false},
		{"a validation error", cancelled("None", "ValidationError"), false},
		{"item too large", cancelled("ItemCollectionSizeLimitExceeded", "None"), false},
		{"no reasons", cancelled(), false},
		{"all None", cancelled("None", "None"), false},
		{"cancelled context", context.Canceled, false},
		{"plain", errors.New("x"), false},
	} {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("%s: Unavailable = %v, want %v", c.name, got, c.want)
		}
	}
}
