package dynamostore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
)

// passingFaults is a table whose n-th PutItem fails with putErr[n] and
// whose every TransactWriteItems fails with transactErr; every other call
// succeeds and reads nothing.
type passingFaults struct {
	dynamostore.API
	putErr      map[int]error
	puts        int
	transactErr error
	updates     int
}

func (f *passingFaults) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.puts++
	if err := f.putErr[f.puts]; err != nil {
		return nil, err
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (f *passingFaults) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.updates++
	return &dynamodb.UpdateItemOutput{}, nil
}

func (f *passingFaults) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (f *passingFaults) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *passingFaults) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, f.transactErr
}

func transactionCancelled(codes ...string) error {
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons(codes...)}
}

var transactionConflict = &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}

// TestPassingTransactionCancellationIsUnavailable: a completion transaction
// cancelled only for reasons that pass (throttling, capacity, a
// conflicting transaction) wrote nothing and may be tried again: Complete's
// error matches idem.ErrStoreUnavailable.
func TestPassingTransactionCancellationIsUnavailable(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	claim := idem.Record{ID: keyspace.ID("acme", "POST /orders", "k_passing_cancel_0123456789"), Digest: "d",
		State: idem.StatePending, Owner: "owner-1", Attempt: 1, LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}
	for _, codes := range [][]string{{"None", "ThrottlingError"}, {"ThrottlingError", "None"},
		{"None", "ProvisionedThroughputExceeded"}, {"TransactionConflict", "None"}, {"None", "TransactionConflict"}} {
		s, err := dynamostore.New(dynamostore.Config{Client: &passingFaults{transactErr: transactionCancelled(codes...)}, Table: "T"})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Complete(context.Background(), claim, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 201},
			Expires: now.Add(time.Hour), Writes: []any{businessPut("Business", "x")}}, now)
		if !errors.Is(err, idem.ErrStoreUnavailable) {
			t.Errorf("reasons %v: Complete = %v, want idem.ErrStoreUnavailable", codes, err)
		}
	}
}

// passingServe runs one keyed request through a Guard on f; transact adds
// a business write to the completion.
func passingServe(t *testing.T, f *passingFaults, transact bool) (events.APIGatewayV2HTTPResponse, bool) {
	t.Helper()
	s, err := dynamostore.New(dynamostore.Config{Client: f, Table: "T"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	r, err := g.HTTPAPI(func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ran = true
		if transact {
			_ = idem.Transact(ctx, businessPut("Business", "run-1"))
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{}`}, nil
	})(context.Background(), guardEvent(newKey(), `{}`))
	if err != nil {
		t.Fatal(err)
	}
	return r, ran
}

// TestPassingFaultsAnswer503: the Guard answers a write that met a passing
// fault 503 with Retry-After, not 500: a completion transaction cancelled
// for throttling or a conflicting transaction (nothing was written: the
// record is released), and a claim refused because a transaction holds the
// record (TransactionConflictException: the handler does not run).
func TestPassingFaultsAnswer503(t *testing.T) {
	for _, codes := range [][]string{{"ThrottlingError", "None"}, {"TransactionConflict", "None"}} {
		if r, _ := passingServe(t, &passingFaults{transactErr: transactionCancelled(codes...)}, true); r.StatusCode != 503 || r.Headers["Retry-After"] == "" {
			t.Errorf("completion cancelled for %v: answered %d %s, want 503 with Retry-After", codes, r.StatusCode, r.Body)
		}
	}
	if r, ran := passingServe(t, &passingFaults{putErr: map[int]error{1: transactionConflict}}, false); ran || r.StatusCode != 503 {
		t.Errorf("claim refused with TransactionConflictException: ran %t, answered %d %s, want 503", ran, r.StatusCode, r.Body)
	}
}

// TestOnceNotCommittedCarriesThePassingCause: Guard.Once whose completion
// transaction was cancelled for throttling returns ErrNotCommitted (ran
// true: Run ran, its writes did not commit) wrapping the store's error:
// ErrStoreUnavailable and the cancellation itself.
func TestOnceNotCommittedCarriesThePassingCause(t *testing.T) {
	s, err := dynamostore.New(dynamostore.Config{Client: &passingFaults{transactErr: transactionCancelled("ThrottlingError", "None")}, Table: "T"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, ran, err := g.Once(context.Background(), idem.Work{Key: newKey(), Operation: "op", Payload: []byte(`{}`),
		Run: func(ctx context.Context) ([]byte, error) {
			_ = idem.Transact(ctx, businessPut("Business", "x"))
			return []byte(`{}`), nil
		}})
	var tce *types.TransactionCanceledException
	if !ran || !errors.Is(err, idem.ErrNotCommitted) || !errors.Is(err, idem.ErrStoreUnavailable) || !errors.As(err, &tce) {
		t.Fatalf("Once: ran %v, %v; want ErrNotCommitted wrapping ErrStoreUnavailable and the cancellation", ran, err)
	}
}
