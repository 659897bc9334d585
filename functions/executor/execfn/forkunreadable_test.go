package execfn

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestUnreadableForkSendsNothing (RED_TEAM 472): a run item whose fork
// description cannot be read (not JSON, a member of another type than
// this version reads, not a string: an item damaged, or written by a
// version whose fork this one does not know) is executed as a fork it
// cannot resolve, failed closed: nothing is sent, as a replay fork's
// effects never are. Before, the description was dropped and the run
// executed as a plain live run: the replay fork of a run that had
// delivered its effect delivered it again. On every emulator, for the
// graph and the webhook workflow.
func TestUnreadableForkSendsNothing(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range []struct {
			name string
			av   types.AttributeValue
		}{
			{"not JSON", &types.AttributeValueMemberS{Value: `{"sourceRunId":`}},
			{"a member of another type", &types.AttributeValueMemberS{Value: `{"sourceRunId":"x","mode":"replay","fromSeq":"0"}`}},
			{"not a string", &types.AttributeValueMemberN{Value: "1"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				s := newForkStack(t, e)
				rc := newReceiver(t)
				s.x.FixtureURL = rc.srv.URL + "/fixture"
				ctx := context.Background()
				for _, wf := range []struct {
					id, inputs string
				}{{webhook.WorkflowReplaySideEffect, `{"delayMs":0}`}, {webhook.WorkflowWebhook, `{"url":"` + rc.srv.URL + `/hook","payload":{}}`}} {
					src := runs.NewRun("acme", wf.id, json.RawMessage(wf.inputs), time.Now())
					if err := s.runs.Create(ctx, src); err != nil {
						t.Fatal(err)
					}
					if r := s.execute(t, src.ID); r.Status != runs.StatusCompleted {
						t.Fatalf("%s source: %s %s", wf.id, r.Status, r.Error)
					}
					sent := len(rc.seen())
					rep := s.fork(t, src, runs.ForkReplay)
					if _, err := e.Client(dynamotest.FastRetries).UpdateItem(ctx, &dynamodb.UpdateItemInput{
						TableName:                 aws.String(s.runs.Table),
						Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: rep.ID}},
						UpdateExpression:          aws.String("SET #f = :f"),
						ExpressionAttributeNames:  map[string]string{"#f": "fork"},
						ExpressionAttributeValues: map[string]types.AttributeValue{":f": c.av},
					}); err != nil {
						t.Fatal(err)
					}
					_ = s.x.Execute(ctx, rep.ID)
					if n := len(rc.seen()) - sent; n != 0 {
						t.Fatalf("%s: a replay fork whose description is unreadable sent %d requests", wf.id, n)
					}
					got, err := s.runs.Get(ctx, rep.ID)
					if err != nil {
						t.Fatal(err)
					}
					if got.Status != runs.StatusFailed || !strings.Contains(got.Error, runs.ErrForkUnreadable.Error()) || len(got.Log) != 0 {
						t.Fatalf("%s: the run %s (%s), log %v; want failed, unread fork named, nothing executed", wf.id, got.Status, got.Error, got.Log)
					}
				}
			})
		}
	})
}
