package runs

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRunParkedByTheEarlierReleaseAcrossTheUpgrade: a run parked by the
// release before RED_TEAM 485 kept its liveShard beside the wake
// attributes (the item here is today's parked item with liveShard written
// back, as that release left it). Today's code serves it as 485 says: the
// due pass lists it and resumes it once due, the stale-run pass may list
// it while it is parked (the earlier behaviour) but its Claim refuses it
// (nothing runs it beside the due pass), and once resumed it is live and
// listed stale when it stops progressing. On every engine.
func TestRunParkedByTheEarlierReleaseAcrossTheUpgrade(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "RunsTable")
		rs := &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: table}
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		r := NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), now)
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := rs.Schedule(ctx, r.ID, Wake{At: now.Add(time.Hour)}, now); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client().UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:                       map[string]types.AttributeValue{runAttrPK: sAV(r.ID)},
			UpdateExpression:          aws.String("SET #l = :l"),
			ExpressionAttributeNames:  map[string]string{"#l": runAttrLive},
			ExpressionAttributeValues: map[string]types.AttributeValue{":l": sAV(liveShardOf(r.ID))}}); err != nil {
			t.Fatal(err)
		}
		later := now.Add(2 * time.Hour)
		// The indexes are eventually consistent on DynamoDB; the
		// emulators update them with the write.
		due, err := rs.Due(ctx, later, 10)
		if err != nil || !slices.Contains(due, r.ID) {
			t.Fatalf("due: %v, %v; want the earlier release's parked run", due, err)
		}
		if _, err := rs.Claim(ctx, r.ID, later, later); err == nil {
			t.Fatal("the stale-run pass's claim took a run the earlier release parked")
		}
		got, err := rs.Resume(ctx, r.ID, later)
		if err != nil || !got.Wake.IsZero() || !live(got.Status) {
			t.Fatalf("resume: %+v, %v", got, err)
		}
		stale, err := rs.Stale(ctx, later.Add(time.Hour), 0)
		if err != nil || !slices.Contains(stale, r.ID) {
			t.Fatalf("stale after the resume: %v, %v; want the resumed run", stale, err)
		}
		if due, err = rs.Due(ctx, later.Add(time.Hour), 10); err != nil || slices.Contains(due, r.ID) {
			t.Fatalf("due after the resume: %v, %v; want the run gone", due, err)
		}
	})
}
