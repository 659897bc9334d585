package dynamotest_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// The tests in this file pin down how the engines differ beyond
// Capabilities; docs/engines.md tabulates them and names these tests.

// TestEngineEmptyStringAttribute: a non-key attribute holding "" is
// refused by DynamoDB Local 1.11 (DynamoDB itself has accepted it since
// 2020), accepted by moto and dynalite. The stores therefore never write an
// empty string (idem/dynamostore omits an empty requestId).
func TestEngineEmptyStringAttribute(t *testing.T) {
	refuses := map[string]bool{dynamotest.DynamoDBLocal: true}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		if e.Kind == dynamotest.External {
			t.Skip("behaviour of an external endpoint is not documented here")
		}
		name := e.CreateTable(t, "FenceTable")
		_, err := e.Client().PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "a"}, "empty": &types.AttributeValueMemberS{Value: ""},
		}})
		var ae interface{ ErrorCode() string }
		refused := errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
		if err != nil && !refused {
			t.Fatal(err)
		}
		if refused != refuses[e.Kind] {
			t.Fatalf("%s: refused %v (%v), documented %v", e.Kind, refused, err, refuses[e.Kind])
		}
	})
}

// TestEngineStreamIteratorOnEmptyShard: an iterator taken at TRIM_HORIZON
// while the shard is still empty, then a TransactWriteItems put. Under
// `idemkit dev`, DynamoDB Local answered TrimmedDataAccessException to such
// iterators (and to those they led to) after the first writes; this plain
// sequence does not provoke it, so the test logs what the engine did and
// asserts what the dev poller's recovery relies on: a fresh TRIM_HORIZON
// iterator reads the record on every engine (functions/devstack devstream.go takes
// one, or one after its checkpoint, on that error).
func TestEngineStreamIteratorOnEmptyShard(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		if e.Kind == dynamotest.External {
			t.Skip("behaviour of an external endpoint is not documented here")
		}
		name := e.CreateTable(t, "RunsTable")
		c, sc := e.Client(), e.StreamsClient()
		d, err := c.DescribeTable(ctx(t), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		arn := d.Table.LatestStreamArn
		ds, err := sc.DescribeStream(ctx(t), &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
		if err != nil || len(ds.StreamDescription.Shards) == 0 {
			t.Fatalf("DescribeStream: %v %+v", err, ds)
		}
		it, err := sc.GetShardIterator(ctx(t), &dynamodbstreams.GetShardIteratorInput{StreamArn: arn,
			ShardId: ds.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		iter := it.ShardIterator
		// Poll the empty shard for a while, as a stream poller does.
		for i := 0; i < 3; i++ {
			out, err := sc.GetRecords(ctx(t), &dynamodbstreams.GetRecordsInput{ShardIterator: iter, Limit: aws.Int32(100)})
			if err != nil {
				t.Fatalf("empty shard: %v", err)
			}
			iter = out.NextShardIterator
			time.Sleep(time.Second)
		}
		if _, err := c.TransactWriteItems(ctx(t), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
			TableName: aws.String(name), Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "run#1"}},
		}}}}); err != nil {
			t.Fatal(err)
		}
		got, trimmed := 0, false
		// A hang guard, not a speed limit: the loop ends at the record.
		deadline := time.Now().Add(2 * time.Minute)
		for got == 0 && !trimmed && iter != nil && time.Now().Before(deadline) {
			out, err := sc.GetRecords(ctx(t), &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			var te *streamtypes.TrimmedDataAccessException
			switch {
			case errors.As(err, &te):
				trimmed = true
			case err != nil:
				t.Fatal(err)
			default:
				got, iter = len(out.Records), out.NextShardIterator
				time.Sleep(50 * time.Millisecond)
			}
		}
		t.Logf("%s: old iterator: TrimmedDataAccessException %v, %d records", e.Kind, trimmed, got)
		if !trimmed && got != 1 {
			t.Fatalf("%s: %d records through the old iterator, want 1", e.Kind, got)
		}
		// A new TRIM_HORIZON iterator reads the record on every engine.
		it, err = sc.GetShardIterator(ctx(t), &dynamodbstreams.GetShardIteratorInput{StreamArn: arn,
			ShardId: ds.StreamDescription.Shards[0].ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := sc.GetRecords(ctx(t), &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil || len(out.Records) != 1 {
			t.Fatalf("fresh iterator: %v, %+v", err, out)
		}
	})
}

// TestEngineTTLDeletesExpiredItems: DynamoDB Local removes an item whose
// TTL attribute lies in the past (as DynamoDB does, within minutes there);
// moto and dynalite never do, so expiry is always also checked on read
// (the stores compare the expiry attribute with their clock).
func TestEngineTTLDeletesExpiredItems(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.DynamoDBLocal)
	if !e.DeletesExpired {
		t.Fatal("DeletesExpired is false for DynamoDB Local")
	}
	// CreateTable leaves TTL off where expired items are deleted: create
	// this one with the template's TTL.
	c := e.Client()
	name := "ttl-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := tables.Create(ctx(t), c, "IdempotencyTable", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "expired"}}
	// A minute ago: DynamoDB ignores TTL values more than five years old.
	past := strconv.FormatInt(time.Now().Add(-time.Minute).Unix(), 10)
	item := map[string]types.AttributeValue{"pk": key["pk"], "expiresAt": &types.AttributeValueMemberN{Value: past}}
	if _, err := c.PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(name), Item: item}); err != nil {
		t.Fatal(err)
	}
	// A hang guard, not a speed limit: the engine's sweep comes late on a
	// loaded machine, and the loop ends as soon as the item is gone.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		out, err := c.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(name), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Item == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the expired item is still there after 5 minutes")
		}
		time.Sleep(250 * time.Millisecond)
	}
}
