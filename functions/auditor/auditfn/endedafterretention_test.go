package auditfn

import (
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
)

// A key claimed again after its record's retention, whose execution ended
// without a run (released to be retried), can reach the other region's
// stream as one change from the old record to that end (replication
// delivers the item's latest write). An ended record keeps no lease write
// to judge the old record's retention by, and the auditor's clock may be
// behind: the retention is then judged at the stream record's own time
// (DynamoDB's, when the change reached this region, no earlier than the
// new claim), so the new key's record is not taken for a rival region's
// execution and the expired record is not written back over it.
func TestKeyEndedAfterRetentionIsNotHeldWhateverTheAuditorsClock(t *testing.T) {
	k := expiredKey(t, "ended-after-retention-0123456789")
	e, ctx, table, item, claim, old, later := k.e, k.ctx, k.table, k.item, k.claim, k.old, k.later
	st := k.st
	if err := st.Release(ctx, claim("req-2", later), later); err != nil {
		t.Fatal(err)
	}
	ended := item()
	for _, skew := range []time.Duration{0, -time.Minute} {
		a := reconcilingAuditor(t, TableRestorer{Client: e.Client(), Table: table}, func() time.Time { return later.Add(skew) })
		rec := events.DynamoDBEventRecord{EventName: "MODIFY", AWSRegion: "eu-west-1", Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: later.Add(time.Second).Truncate(time.Second)},
			Keys:                        toLambdaMap(t, map[string]types.AttributeValue{"pk": old["pk"]}),
			OldImage:                    toLambdaMap(t, old), NewImage: toLambdaMap(t, ended)}}
		resp, err := a.HandleLambda(ctx, lambdaEvent(t, rec))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("HandleLambda: %+v %v", resp, err)
		}
		got, err := idemdynamo.DecodeItem(item())
		if err != nil {
			t.Fatal(err)
		}
		if got.RequestID != "req-2" || got.State != idem.StateRetryableFailure {
			t.Fatalf("auditor clock %v from the new claim's: the key holds %s (%s); want the new key's released record, not the expired one written back",
				skew, got.RequestID, got.State)
		}
	}
}
