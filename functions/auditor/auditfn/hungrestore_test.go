package auditfn

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// hangingRestorer writes every restore except the one of the record hang,
// which never answers (a connection that hangs: the SDK bounds no call by
// a time of its own) until its context ends; it keeps that call's
// deadline.
type hangingRestorer struct {
	hang     string
	mu       sync.Mutex
	deadline time.Time
	hung     int
	writes   int
}

func (h *hangingRestorer) Restore(ctx context.Context, winner, _ map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	h.mu.Lock()
	if winner["pk"].(*types.AttributeValueMemberS).Value != h.hang {
		h.writes++
		h.mu.Unlock()
		return true, nil, nil
	}
	h.hung++
	h.deadline, _ = ctx.Deadline()
	h.mu.Unlock()
	<-ctx.Done()
	return false, nil, ctx.Err()
}

// A write-back that never answered ran until the invocation's own
// deadline, where Lambda ends it as a timeout: a function error, so the
// whole batch was delivered again (bisected), and the conflicts recorded
// and write-backs counted before that record were recorded and counted
// again, which the partial batch response exists to avoid (RED_TEAM 151).
// Each call is now bounded by the deadline less a margin: the hung
// write-back fails as any failed write-back does, reported as the batch
// item that failed, by its sequence number, before the deadline, and the
// records before it are not delivered again (RED_TEAM 438).
func TestHungWriteBackIsReportedAsItsBatchItemBeforeTheDeadline(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	var recs []events.DynamoDBEventRecord
	var ids []string
	for i := range 3 {
		id := keyspace.ID("tenant:acme", "POST /runs", "hung-write-back-key-0123456789-"+strconv.Itoa(i))
		ids = append(ids, id)
		var imgs [2]map[string]types.AttributeValue
		for j, run := range []string{"acme/run-a", "acme/run-z"} {
			table, st := newIdemTable(t, e)
			req := fmt.Sprintf("req-%d-%d", i, j)
			res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
				LeaseExpires: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}, t0)
			if err != nil || res.Decision != idem.Claimed {
				t.Fatalf("claim: %+v %v", res, err)
			}
			if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
				Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + run + `"}`)}}, t0); err != nil {
				t.Fatal(err)
			}
			imgs[j] = scanOne(t, ctx, e, table)
		}
		// This region's record named the lower run; the other region's,
		// naming the higher, replicated over it: a write-back.
		recs = append(recs, events.DynamoDBEventRecord{EventName: "MODIFY", AWSRegion: "eu-west-1", Change: events.DynamoDBStreamRecord{
			Keys:     toLambdaMap(t, map[string]types.AttributeValue{"pk": imgs[1]["pk"]}),
			OldImage: toLambdaMap(t, imgs[0]), NewImage: toLambdaMap(t, imgs[1])}})
	}
	r := &hangingRestorer{hang: ids[1]}
	a := reconcilingAuditor(t, r, func() time.Time { return t0 })
	ev := lambdaEvent(t, recs...)
	lambdaCtx, cancel := context.WithDeadline(ctx, time.Now().Add(2*DefaultMargin))
	defer cancel()
	lambdaDL, _ := lambdaCtx.Deadline()
	resp, err := a.HandleLambda(lambdaCtx, ev)
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != ev.Records[1].Change.SequenceNumber {
		t.Fatalf("HandleLambda = %+v, %v; want the hung record reported by its sequence number %s", resp, err, ev.Records[1].Change.SequenceNumber)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hung != 1 || r.writes != 1 {
		t.Fatalf("%d hung, %d written; want the first written and the second hung", r.hung, r.writes)
	}
	if r.deadline.IsZero() || r.deadline.After(lambdaDL.Add(-DefaultMargin)) {
		t.Fatalf("the write-back was bounded by %v, %v before the invocation's deadline; want at least %v before it",
			r.deadline, lambdaDL.Sub(r.deadline), DefaultMargin)
	}
}
