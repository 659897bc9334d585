package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestTransactionalCompletionLandedWithEveryAnswerLost: a completion
// carrying idem.Transact writes whose transaction DynamoDB applied while
// every answer of it was lost (the SDK's three attempts, each answer reset:
// the first applied, the others refused by the record's own condition, the
// client seeing none of it) committed the handler's writes. Guard.Once
// returns the value (ran, no error), never ErrNotCommitted, which says
// nothing was committed; the HTTP Guard answers the handler's own 201,
// not a 503; the next request is the replay and the handler never runs
// again; so too when the release that follows the failed completion
// (refused by it) has its every answer lost as well. dynalite has no transactions (ErrNoTransactions, nothing written:
// TestTransactionalCompletion).
func TestTransactionalCompletionLandedWithEveryAnswerLost(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		g := unavailableGuard(t, v.s)

		t.Run("Once", func(t *testing.T) {
			v.f.Clear()
			key := newKey()
			runs := 0
			w := idem.Work{Key: key, Operation: "charge", Payload: []byte(`{"a":1}`),
				Run: func(ctx context.Context) ([]byte, error) {
					runs++
					if err := idem.Transact(ctx, businessPut(biz, "once-"+key)); err != nil {
						return nil, err
					}
					return []byte(`{"charged":true}`), nil
				}}
			v.f.FailNextAfterSend("TransactWriteItems", 3, dynamotest.ResponseLost())
			val, ran, err := g.Once(ctxT(t), w)
			v.f.Clear()
			if !businessExists(t, v.c, biz, "once-"+key) {
				t.Fatal("the transaction did not land; the test injects nothing it means to")
			}
			if err != nil || !ran || string(val) != `{"charged":true}` {
				t.Fatalf("Once whose writes committed = %q, ran %t, %v; want the value, ran, no error", val, ran, err)
			}
			val, ran, err = g.Once(ctxT(t), w)
			if err != nil || ran || string(val) != `{"charged":true}` || runs != 1 {
				t.Fatalf("Once again = %q, ran %t, %v (runs %d); want the recorded value, not run", val, ran, err, runs)
			}
		})

		for _, c := range []struct {
			name, prefix string
			// releaseLost: the release after the failed completion
			// (refused by the landed completion) has its every answer
			// lost too; the record is read back all the same.
			releaseLost bool
		}{
			{"HTTPAPI", "http-", false},
			{"ReleaseLostToo", "rel-", true},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				key := newKey()
				runs := 0
				h := g.HTTPAPI(func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					if err := idem.Transact(ctx, businessPut(biz, c.prefix+key)); err != nil {
						return events.APIGatewayV2HTTPResponse{}, err
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"run":"r-1"}`}, nil
				})
				ev := guardEvent(key, `{"a":1}`)
				v.f.FailNextAfterSend("TransactWriteItems", 3, dynamotest.ResponseLost())
				if c.releaseLost {
					v.f.FailNextAfterSend("UpdateItem", 3, dynamotest.ResponseLost())
				}
				r := call(t, h, ev)
				if v.f.Pending() != 0 {
					t.Fatalf("faults not consumed: %d pending", v.f.Pending())
				}
				v.f.Clear()
				if !businessExists(t, v.c, biz, c.prefix+key) {
					t.Fatal("the transaction did not land")
				}
				if r.StatusCode != 201 || r.Body != `{"run":"r-1"}` || replayed(r.Headers) {
					t.Fatalf("first answer %d %s; want the handler's 201 (its writes committed)", r.StatusCode, r.Body)
				}
				r = call(t, h, ev)
				if r.StatusCode != 201 || r.Body != `{"run":"r-1"}` || !replayed(r.Headers) || runs != 1 {
					t.Fatalf("retry %d %s (runs %d); want the replay", r.StatusCode, r.Body, runs)
				}
			})
		}
	})
}
