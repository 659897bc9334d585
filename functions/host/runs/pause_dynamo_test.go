package runs

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestPauseOfARunStoredBeforeVersions: a run stored before versions were
// kept (no version, no history: it reads as version 0) is paused and
// resumed as any other, its compare-and-set naming the absent version,
// never refused on each try.
func TestPauseOfARunStoredBeforeVersions(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		r := NewRun("acme", "webhook", nil, t0)
		if err := d.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(d.Table),
			Key:              map[string]types.AttributeValue{runAttrPK: sAV(r.ID)},
			UpdateExpression: aws.String("REMOVE #v, #h"), ExpressionAttributeNames: map[string]string{"#v": runAttrVersion, "#h": runAttrHistory}}); err != nil {
			t.Fatal(err)
		}
		if old, err := d.Get(ctx, r.ID); err != nil || old.Version != 0 {
			t.Fatalf("the run without a version: %+v %v", old, err)
		}
		p, err := d.Pause(ctx, r.ID, Pause{By: "p1"}, t0)
		if err != nil || p.Status != StatusPaused || p.Version != 1 {
			t.Fatalf("pause of a run without a version: %+v %v, want paused at version 1", p, err)
		}
		if res, err := d.Unpause(ctx, r.ID, "r1", "", t0); err != nil || res.Status != StatusRunning || res.Version != 2 {
			t.Fatalf("resume: %+v %v", res, err)
		}
	})
}
