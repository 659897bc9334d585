package auditfn

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

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/fence"
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
	table := e.CreateTable(t, "IdempotencyTable")
	st, err := idemdynamo.New(idemdynamo.Config{Client: e.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	id := keyspace.ID("tenant:acme", "POST /runs", "sequence-number-of-the-failed-0123")
	res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-1", RequestID: "req-1",
		LeaseExpires: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}, t0)
	if err != nil || res.Decision != idem.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
		Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"acme/run-1"}`)}}, t0); err != nil {
		t.Fatal(err)
	}
	out, err := e.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("scan: %v", err)
	}
	old := out.Items[0]
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
	ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &Auditor{Conflicts: ca, Restore: failingRestorer{}, Now: func() time.Time { return t0.Add(time.Minute) },
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	resp, err := a.HandleLambda(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	want := []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[1].Change.SequenceNumber}}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0] != want[0] {
		t.Fatalf("batch item failures %+v; want %+v (the failed record's sequence number)", resp.BatchItemFailures, want)
	}
}
