package auditfn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/fence"
)

// thirdRegion is a replica into which a third region's record (third)
// replicated before the write-back of the change the auditor reads: each
// write-back conditional on the change's new image finds third instead;
// the first write-back over third fails (throttled past the SDK's
// retries), the next one writes.
type thirdRegion struct {
	third  map[string]types.AttributeValue
	failed bool
	writes int
}

func (r *thirdRegion) Restore(_ context.Context, _, loser map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	if loser["requestId"].(*types.AttributeValueMemberS).Value != r.third["requestId"].(*types.AttributeValueMemberS).Value {
		return false, r.third, nil // the condition on the change's record fails: the replica holds third
	}
	if !r.failed {
		r.failed = true
		return false, nil, errors.New("throttled past the SDK's retries")
	}
	r.writes++
	return true, nil, nil
}

// With three regions, the record a change shows replaced by a third
// region's record before the write-back is compared with that record too
// (RED_TEAM 317): the conflict with the change's own record was recorded
// at once, before the write-back over the third region's record was
// decided. When that write-back failed, the record was delivered again
// and the first conflict recorded again: one lost run logged and counted
// twice, though a retried batch records each conflict once (RED_TEAM 151).
// Every conflict of a record is now recorded once all its write-backs are
// decided (RED_TEAM 439).
func TestThirdRegionWriteBackRetriedRecordsEachConflictOnce(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	id := keyspace.ID("tenant:acme", "POST /runs", "third-region-retried-key-0123456789")
	imgs := map[string]map[string]types.AttributeValue{}
	for i, run := range []string{"acme/run-a", "acme/run-z", "acme/run-m"} {
		table, st := newIdemTable(t, e)
		req := "req-" + strconv.Itoa(i)
		res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
			LeaseExpires: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}, t0)
		if err != nil || res.Decision != idem.Claimed {
			t.Fatalf("claim: %+v %v", res, err)
		}
		if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
			Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + run + `"}`)}}, t0); err != nil {
			t.Fatal(err)
		}
		imgs[run] = scanOne(t, ctx, e, table)
	}
	// This region's record named run a; the second region's, naming z,
	// replicated over it (the change), then the third's, naming m.
	rec := events.DynamoDBEventRecord{EventName: "MODIFY", AWSRegion: "eu-west-1", Change: events.DynamoDBStreamRecord{
		Keys:     toLambdaMap(t, map[string]types.AttributeValue{"pk": imgs["acme/run-a"]["pk"]}),
		OldImage: toLambdaMap(t, imgs["acme/run-a"]), NewImage: toLambdaMap(t, imgs["acme/run-z"])}}
	r := &thirdRegion{third: imgs["acme/run-m"]}
	a := reconcilingAuditor(t, r, func() time.Time { return t0 })
	var lb bytes.Buffer
	ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1", Log: slog.New(slog.NewJSONHandler(&lb, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a.Conflicts = ca
	delivered := 0
	for ; delivered < 3; delivered++ {
		resp, err := a.HandleLambda(ctx, lambdaEvent(t, rec))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) == 0 {
			break
		}
	}
	if r.writes != 1 {
		t.Fatalf("%d write-backs over the third region's record, want 1", r.writes)
	}
	losers := map[string]int{}
	for _, ev := range conflictEvents(t, lb.String()) {
		losers[fmt.Sprint(ev["winner"])+" over "+fmt.Sprint(ev["loser"])]++
	}
	if len(losers) != 2 {
		t.Fatalf("conflicts %v: want run a over z, and over m", losers)
	}
	for c, n := range losers {
		if n != 1 {
			t.Errorf("after %d deliveries the conflict %s was recorded %d times, want once", delivered+1, c, n)
		}
	}
}
