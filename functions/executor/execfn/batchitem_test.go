package execfn

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// A DynamoDB stream's partial batch response names a failed record by its
// sequence number (dynamodb.SequenceNumber), which the event source
// mapping checkpoints at, not by its eventID. The executor's retried run
// is reported by the sequence number of its INSERT.
func TestRetriedRunIsReportedByItsSequenceNumber(t *testing.T) {
	f := newFixture(t)
	r := f.webhookRun(t, "http://127.0.0.1:1/unused")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.x.Runs = cancellingRuns{f.runs, cancel}
	img := map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute(r.ID), "tenant": events.NewStringAttribute(r.Tenant),
		"workflowId": events.NewStringAttribute(r.WorkflowID), "status": events.NewStringAttribute(string(r.Status)),
	}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
		EventID: "c4ca4238a0b923820dcc509a6f75849b", EventName: "INSERT", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{SequenceNumber: "400000000000000499660", StreamViewType: "NEW_AND_OLD_IMAGES",
			Keys: map[string]events.DynamoDBAttributeValue{"pk": img["pk"]}, NewImage: img},
	}}}
	resp, err := f.x.HandleLambda(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "400000000000000499660" {
		t.Fatalf("batch item failures %+v; want the record's sequence number", resp.BatchItemFailures)
	}
}
