package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// SweepAPI is the part of *dynamodb.Client the Sweeper uses.
type SweepAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Sweeper enforces retention on a table that has no TTL: MRSC global tables
// support neither TTL nor transactions. It works on every idemkit table
// whose items carry the TTL attribute as Unix seconds (expiresAt: the
// effects, fence and idempotency tables). It is off the hot path: run it
// on a schedule (e.g. hourly).
//
// Guarantees: an item is deleted only if its expiry is at or before the
// sweep's now when the delete is applied (each DeleteItem is conditional on
// it, so an item renewed between the scan and the delete survives); items
// without the attribute are never deleted. Every reader already treats an
// expired item as absent, so a sweep changes storage, not behaviour.
type Sweeper struct {
	// API is the DynamoDB client. Required.
	API SweepAPI
	// Table is the table name. Required.
	Table string
	// KeyAttrs are the primary-key attribute names. Default ["pk"]; the
	// effects table needs ["pk", "sk"].
	KeyAttrs []string
	// ExpiresAttr is the expiry attribute (Unix seconds). Default "expiresAt".
	ExpiresAttr string
	// PageSize bounds the items read per Scan page. Default 500.
	PageSize int32
}

// Sweep deletes every item whose expiry is at or before now and returns how
// many it deleted. It stops at the first error (a later sweep resumes: the
// scan is stateless).
func (w *Sweeper) Sweep(ctx context.Context, now time.Time) (int, error) {
	if w.API == nil || w.Table == "" {
		return 0, errors.New("fence/dynamostore: Sweeper needs API and Table")
	}
	keys := w.KeyAttrs
	if len(keys) == 0 {
		keys = []string{"pk"}
	}
	exp := w.ExpiresAttr
	if exp == "" {
		exp = "expiresAt"
	}
	page := w.PageSize
	if page <= 0 {
		page = 500
	}
	cutoff := now.Unix()
	expired := expression.Name(exp).LessThanEqual(expression.Value(cutoff))
	proj := expression.NamesList(expression.Name(exp))
	for _, k := range keys {
		proj = proj.AddNames(expression.Name(k))
	}
	scan, err := expression.NewBuilder().WithFilter(expired).WithProjection(proj).Build()
	if err != nil {
		return 0, fmt.Errorf("fence/dynamostore: expression: %w", err)
	}
	del, err := expression.NewBuilder().WithCondition(expired).Build()
	if err != nil {
		return 0, fmt.Errorf("fence/dynamostore: expression: %w", err)
	}
	n := 0
	var start map[string]types.AttributeValue
	for {
		out, err := w.API.Scan(ctx, &dynamodb.ScanInput{
			TableName: aws.String(w.Table), Limit: aws.Int32(page), ExclusiveStartKey: start,
			FilterExpression:          scan.Filter(),
			ProjectionExpression:      scan.Projection(),
			ExpressionAttributeNames:  scan.Names(),
			ExpressionAttributeValues: scan.Values(),
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			return n, fmt.Errorf("fence/dynamostore: Scan: %w", err)
		}
		for _, it := range out.Items {
			key := make(map[string]types.AttributeValue, len(keys))
			for _, k := range keys {
				v, ok := it[k]
				if !ok {
					return n, fmt.Errorf("fence/dynamostore: item without key attribute %q", k)
				}
				key[k] = v
			}
			_, err := w.API.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName: aws.String(w.Table), Key: key,
				ConditionExpression:       del.Condition(),
				ExpressionAttributeNames:  del.Names(),
				ExpressionAttributeValues: del.Values(),
			})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				n++
			case errors.As(err, &ccf):
				// Renewed (or already deleted) since the scan: keep it.
			default:
				return n, fmt.Errorf("fence/dynamostore: DeleteItem: %w", err)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		start = out.LastEvaluatedKey
	}
}
