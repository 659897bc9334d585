package auditfn

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestEffectClaimDeletedFromAPolledStreamIsAuditedAsAnEffect: a stream
// read with the dynamodbstreams client (`idemkit dev`'s pollers,
// stream.FromStreams) gives a REMOVE no new image, as a Lambda event
// does, so the auditor audits an effect record's deletion as an effect
// record's: an unfinished claim (firing, its lease running) deleted by
// TTL is counted (RED_TEAM 350). Before, the REMOVE carried an empty new
// image, which the auditor read as the item (no sort key: a Layer-1
// record) and counted nothing.
func TestEffectClaimDeletedFromAPolledStreamIsAuditedAsAnEffect(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		table := e.CreateTable(t, "EffectsTable")
		now := time.Now()
		st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: st, Lease: time.Hour,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return now }}}, Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		run := runs.NewRunID("acme")
		id, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "n", Provider: "p"})
		// The executor dies after the fire mark: the record is firing.
		func() {
			defer func() { _ = recover() }()
			_, _ = l.Do(ctx, ledger.Effect{Identity: id, RunID: run, NodeID: "n"}, func(context.Context, ledger.Call) ([]byte, error) { panic("crash") })
		}()
		items, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil || len(items.Items) != 1 {
			t.Fatal(items, err)
		}
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": items.Items[0]["pk"], "sk": items.Items[0]["sk"]}}); err != nil {
			t.Fatal(err)
		}
		var removes []stream.StreamRecord
		for _, r := range effectsStreamRecords(ctx, t, e, c, table) {
			if r.EventName == "REMOVE" {
				if r.NewImage != nil {
					t.Errorf("a REMOVE read from the stream has a new image %v, want none", r.NewImage)
				}
				// The deletion as DynamoDB's TTL makes it.
				r.PrincipalID, r.IdentityType = stream.TTLPrincipal, "Service"
				removes = append(removes, r)
			}
		}
		if len(removes) != 1 {
			t.Fatalf("%d REMOVE records, want 1", len(removes))
		}
		a := &Auditor{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Now: func() time.Time { return now }}
		if got := a.Audit(ctx, removes); got.TTLExpiredPending[TableEffects] != 1 || got.TTLExpiredPending[TableIdempotency] != 0 {
			t.Errorf("the TTL deletion of a firing claim, polled: %+v, want one unfinished effect claim counted", got)
		}
	})
}

// effectsStreamRecords returns the records of table's stream, every shard
// from its trim horizon.
func effectsStreamRecords(ctx context.Context, t *testing.T, e *dynamotest.Emulator, c *dynamodb.Client, table string) []stream.StreamRecord {
	t.Helper()
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	sc := e.StreamsClient()
	sd, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	var recs []stream.StreamRecord
	for _, sh := range sd.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.Table.LatestStreamArn,
			ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Records {
				sr, err := stream.FromStreams(r)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, sr)
			}
			if len(out.Records) == 0 {
				break // an open shard: everything written so far was read
			}
			iter = out.NextShardIterator
		}
	}
	return recs
}
