package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestLandedCompletionFoundWhileItsChunksCannotBeRead: a completion whose
// response is stored in chunk items, applied with every answer of it lost
// (the record's PutItem, or the transaction with idem.Transact writes),
// is read back to tell whether it landed, while every chunk read is
// throttled past the SDK's retries. The record item read says it is this
// claim's completion (its owner token, its state), which is all the read
// back needs: the first caller gets the handler's own 201 and Guard.Once
// its value without error (its writes committed), never a 503 or
// idem.ErrNotCommitted; each retry is the replay, the handler runs once.
// The transactional cases run on the engines with transactions.
func TestLandedCompletionFoundWhileItsChunksCannotBeRead(t *testing.T) {
	raw := make([]byte, 450<<10)
	_, _ = rand.Read(raw)
	chunked := `"` + base64.StdEncoding.EncodeToString(raw) + `"` // 600 KB: 2 chunks, deflated or not
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := unavailableGuard(t, v.s)
		var biz string
		if e.Caps.Transactions {
			biz = e.CreateTable(t, "RunsTable")
		}
		for _, c := range []struct {
			name string
			txn  bool
		}{
			{"PutItem", false},
			{"TransactWriteItems", true},
		} {
			if c.txn && !e.Caps.Transactions {
				continue // no transactions on this engine (TestTransactionalCompletion); not a skip CI counts
			}
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				before := v.chunkItems(t)
				key := newKey()
				runs := 0
				h := g.HTTPAPI(func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					if c.txn {
						if err := idem.Transact(ctx, businessPut(biz, "rb-"+key)); err != nil {
							return events.APIGatewayV2HTTPResponse{}, err
						}
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: chunked}, nil
				})
				ev := guardEvent(key, `{"a":1}`)
				if c.txn {
					v.f.FailNextAfterSend("TransactWriteItems", 3, dynamotest.ResponseLost())
				} else {
					v.f.PassNext("PutItem", 3) // the claim and the two chunk items
					v.f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
				}
				v.f.FailNext("BatchGetItem", 1000, dynamotest.Throttle())
				r := call(t, h, ev)
				v.f.Clear()
				if c.txn && !businessExists(t, v.c, biz, "rb-"+key) {
					t.Fatal("the transaction did not land; the test injects nothing it means to")
				}
				if r.StatusCode != 201 || r.Body != chunked || replayed(r.Headers) {
					t.Fatalf("first answer %d %.200s; want the handler's own 201 (its completion landed)", r.StatusCode, r.Body)
				}
				for range 2 {
					if r = call(t, h, ev); r.StatusCode != 201 || r.Body != chunked || !replayed(r.Headers) {
						t.Fatalf("retry %d %.200s; want the replay", r.StatusCode, r.Body)
					}
				}
				if runs != 1 {
					t.Fatalf("handler ran %d times, want once", runs)
				}
				if v.chunkItems(t) != before+2 {
					t.Fatal("the response is not in two chunk items; the test injects nothing it means to")
				}
			})
		}

		if !e.Caps.Transactions {
			return // Once commits through a transaction: none on this engine
		}
		t.Run("Once", func(t *testing.T) {
			v.f.Clear()
			key := newKey()
			runs := 0
			value := []byte(chunked)
			w := idem.Work{Key: key, Operation: "export", Payload: []byte(`{"a":1}`),
				Run: func(ctx context.Context) ([]byte, error) {
					runs++
					if err := idem.Transact(ctx, businessPut(biz, "once-"+key)); err != nil {
						return nil, err
					}
					return value, nil
				}}
			v.f.FailNextAfterSend("TransactWriteItems", 3, dynamotest.ResponseLost())
			v.f.FailNext("BatchGetItem", 1000, dynamotest.Throttle())
			val, ran, err := g.Once(ctxT(t), w)
			v.f.Clear()
			if !businessExists(t, v.c, biz, "once-"+key) {
				t.Fatal("the transaction did not land; the test injects nothing it means to")
			}
			if err != nil || !ran || string(val) != chunked {
				t.Fatalf("Once whose writes committed = %.80q, ran %t, %v; want the value, ran, no error", val, ran, err)
			}
			val, ran, err = g.Once(ctxT(t), w)
			if err != nil || ran || string(val) != chunked || runs != 1 {
				t.Fatalf("Once again = %.80q, ran %t, %v (runs %d); want the recorded value, not run", val, ran, err, runs)
			}
		})
	})
}
