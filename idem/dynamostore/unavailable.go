package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/storeconfig"
)

// unavailable returns err wrapped with idem.ErrStoreUnavailable when it
// means DynamoDB could not be used (after the SDK's own retries): the call
// was throttled, got a 5xx, could not connect or lost its connection, or
// ran out of its context's deadline. Every other error (a failed
// condition, a cancelled transaction, a validation error, the caller
// hanging up) is returned as it is.
func unavailable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, idem.ErrStoreUnavailable) || errors.Is(err, idem.ErrStoreMisconfigured) {
		return err
	}
	if awserr.Unavailable(err) {
		return fmt.Errorf("%w: %w", idem.ErrStoreUnavailable, err)
	}
	return err
}

// misconfigured returns err wrapped with idem.ErrStoreMisconfigured when
// it says a table is missing or has another key schema
// (storeconfig.TableProblem), naming where (the table) and the shape the
// store needs; else err.
func misconfigured(where string, err error) error {
	what := storeconfig.TableProblem(err)
	if what == "" {
		return err
	}
	return fmt.Errorf("%w: %s: %s (the store's table is created from template.yaml's IdempotencyTable, partition key pk of type S): %w",
		idem.ErrStoreMisconfigured, where, what, err)
}

// classified is the API the store calls: cfg.Client with the errors of
// calls that could not use DynamoDB wrapped with idem.ErrStoreUnavailable
// (unavailable), and those that say the table is not the one configured
// wrapped with idem.ErrStoreMisconfigured (misconfigured). It makes no
// call of its own.
type classified struct {
	c     API
	table string
}

func (k classified) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := k.c.GetItem(ctx, in, o...)
	return out, k.classify(err)
}

func (k classified) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := k.c.PutItem(ctx, in, o...)
	return out, k.classify(err)
}

func (k classified) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := k.c.UpdateItem(ctx, in, o...)
	return out, k.classify(err)
}

func (k classified) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := k.c.DeleteItem(ctx, in, o...)
	return out, k.classify(err)
}

func (k classified) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := k.c.BatchGetItem(ctx, in, o...)
	return out, k.classify(err)
}

func (k classified) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := k.c.TransactWriteItems(ctx, in, o...)
	// The transaction also writes the tables of Transact's writes.
	return out, unavailable(misconfigured(fmt.Sprintf("table %q or a table of the transactional writes", k.table), err))
}

func (k classified) classify(err error) error {
	return unavailable(misconfigured(fmt.Sprintf("table %q", k.table), err))
}
