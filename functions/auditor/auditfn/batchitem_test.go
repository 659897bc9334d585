package auditfn

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// failingRestorer fails every restore.
type failingRestorer struct{}

func (failingRestorer) Restore(context.Context, map[string]types.AttributeValue, map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	return false, nil, errors.New("throttled past the SDK's retries")
}

// A DynamoDB stream's partial batch response names the failed record by
// its sequence number (dynamodb.SequenceNumber), not by its eventID: the
// event source mapping checkpoints at that sequence number, and an
// identifier that is none of the batch's sequence numbers does not
// redeliver from the failed record. The auditor's failed Layer-1 restore
// is reported by the sequence number of its record.
func TestFailedRestoreIsReportedByItsSequenceNumber(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	table, st := newIdemTable(t, e)
	id := keyspace.ID("tenant:acme", "POST /runs", "sequence-number-of-the-failed-0123")
	completedByReq1(t, ctx, st, id, "acme/run-1", t0)
	old := scanOne(t, ctx, e, table)
	// The first record needs no restore (the REMOVE of a claim naming no
	// run: nothing to write back); the second, the
	// deletion of the record naming the key's run, needs one, which fails.
	pending := map[string]types.AttributeValue{}
	for k, v := range old {
		pending[k] = v
	}
	pending["state"] = &types.AttributeValueMemberS{Value: string(idem.StatePending)}
	remove := func(img map[string]types.AttributeValue) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventName: "REMOVE", AWSRegion: "eu-west-1", Change: events.DynamoDBStreamRecord{
			Keys: toLambdaMap(t, map[string]types.AttributeValue{"pk": img["pk"]}), OldImage: toLambdaMap(t, img)}}
	}
	ev := lambdaEvent(t, remove(pending), remove(old))
	for i := range ev.Records {
		// Real event ids are not sequence numbers.
		ev.Records[i].EventID = "c81e728d9d4c2f636f067f89cc14862" + string(rune('a'+i))
	}
	a := reconcilingAuditor(t, failingRestorer{}, func() time.Time { return t0.Add(time.Minute) })
	resp, err := a.HandleLambda(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[1].Change.SequenceNumber}}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0] != want[0] {
		t.Fatalf("batch item failures %+v; want %+v (the failed record's sequence number)", resp.BatchItemFailures, want)
	}
}
