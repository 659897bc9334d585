package dynamotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/internal/tables"
)

// Probe determines e's capabilities empirically on a scratch table (created
// with a NEW_AND_OLD_IMAGES stream and deleted afterwards):
//   - TTL: UpdateTimeToLive is accepted and DescribeTimeToLive reports it;
//   - Transactions: a one-item TransactWriteItems succeeds and is visible;
//   - ReturnValuesOnConditionCheckFailure: a failed attribute_not_exists put
//     with ALL_OLD returns the existing item;
//   - Streams: the table reports a stream ARN and a written item can be read
//     back through the Streams API (DescribeStream, GetShardIterator,
//     GetRecords).
//
// An operation the server rejects as unknown or unimplemented makes the
// capability false; any other failure is returned as an error.
func Probe(ctx context.Context, e *Emulator) (Capabilities, error) {
	var caps Capabilities
	c := e.Client()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "probe-" + hex.EncodeToString(b[:])
	def := tables.Def{
		LogicalID:            "Probe",
		Type:                 "AWS::DynamoDB::Table",
		Enabled:              true,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
		StreamViewType:       types.StreamViewTypeNewAndOldImages,
		TTLAttribute:         "expiresAt",
	}
	res, err := tables.CreateDef(ctx, c, def, name)
	if err != nil {
		return caps, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.DeleteTable(dctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}()

	if res.TTL {
		out, err := c.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil && !tables.IsUnsupported(err) {
			return caps, fmt.Errorf("DescribeTimeToLive: %w", err)
		}
		if err == nil && out.TimeToLiveDescription != nil &&
			aws.ToString(out.TimeToLiveDescription.AttributeName) == "expiresAt" &&
			(out.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled ||
				out.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
			caps.TTL = true
		}
	}

	item := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk},
			"v":  &types.AttributeValueMemberS{Value: "old"},
		}
	}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item("a")}); err != nil {
		return caps, fmt.Errorf("PutItem: %w", err)
	}
	_, err = c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(name),
		Item:                                item("a"),
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		if v, ok := ccf.Item["v"].(*types.AttributeValueMemberS); ok && v.Value == "old" {
			caps.ReturnValuesOnConditionCheckFailure = true
		}
	case err == nil:
		return caps, errors.New("conditional PutItem on an existing item succeeded")
	case isValidation(err) || tables.IsUnsupported(err):
		// Parameter not understood: not supported.
	default:
		return caps, fmt.Errorf("conditional PutItem: %w", err)
	}

	_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(name), Item: item("tx")}}},
	})
	switch {
	case err == nil:
		out, err := c.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(name),
			Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "tx"}},
			ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return caps, fmt.Errorf("GetItem: %w", err)
		}
		caps.Transactions = out.Item != nil
	case tables.IsUnsupported(err):
	default:
		return caps, fmt.Errorf("TransactWriteItems: %w", err)
	}

	if res.StreamARN != "" {
		ok, err := probeStream(ctx, e.StreamsClient(), res.StreamARN)
		if err != nil {
			return caps, err
		}
		caps.Streams = ok
	}
	return caps, nil
}

func probeStream(ctx context.Context, sc *dynamodbstreams.Client, arn string) (bool, error) {
	ds, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		if tables.IsUnsupported(err) {
			return false, nil
		}
		return false, fmt.Errorf("DescribeStream: %w", err)
	}
	for _, sh := range ds.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
			StreamArn:         aws.String(arn),
			ShardId:           sh.ShardId,
			ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
		})
		if err != nil {
			return false, fmt.Errorf("GetShardIterator: %w", err)
		}
		recs, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			return false, fmt.Errorf("GetRecords: %w", err)
		}
		for _, r := range recs.Records {
			if r.Dynamodb != nil && r.Dynamodb.NewImage != nil {
				return true, nil
			}
		}
	}
	return false, nil
}

func isValidation(err error) bool {
	var ae interface{ ErrorCode() string }
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}
