package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCompletionLandedWithEveryAnswerLost: on every engine, a completion
// without idem.Transact writes whose record PutItem DynamoDB applied while
// every answer of it was lost (the SDK's three attempts: the first
// applied, each answer reset) is the request's outcome: the first caller
// gets the handler's own 201 (not a 503 whose retry could only be the
// replay, or for a response not kept 410, so that no caller ever saw the
// true response), Guard.Once its value without error, and each retry the
// replay; the handler runs once. The response is inline, in chunk items
// (the chunk writes pass, the record's fails), or not kept; and the same
// when the first attempt applied and the SDK's retries were throttled.
// Throttled on every attempt (nothing written) it is still 503, the
// record left claimed.
func TestCompletionLandedWithEveryAnswerLost(t *testing.T) {
	raw := make([]byte, 450<<10)
	_, _ = rand.Read(raw)
	chunked := `"` + base64.StdEncoding.EncodeToString(raw) + `"` // 600 KB: 2 chunks, deflated or not
	big := string(overLimit())
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := unavailableGuard(t, v.s)
		for _, c := range []struct {
			name   string
			body   string
			chunks int
			// throttled: the first attempt applied and lost, the SDK's
			// retries throttled (else every answer lost).
			throttled bool
		}{
			{"inline", `{"run":"r-1"}`, 0, false},
			{"chunked", chunked, 2, false},
			{"not kept", big, 0, false},
			{"lost then throttled", `{"run":"r-1"}`, 0, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				runs := 0
				h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: c.body}, nil
				})
				ev := guardEvent(newKey(), `{"a":1}`)
				// The claim and the chunk items pass; the record's PutItem
				// is applied with every answer lost.
				v.f.PassNext("PutItem", 1+c.chunks)
				if c.throttled {
					v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
					v.f.FailNext("PutItem", 2, dynamotest.Throttle())
				} else {
					v.f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
				}
				r := call(t, h, ev)
				if v.f.Pending() != 0 {
					t.Fatalf("faults not consumed: %d pending", v.f.Pending())
				}
				v.f.Clear()
				if r.StatusCode != 201 || r.Body != c.body || replayed(r.Headers) {
					t.Fatalf("first answer %d %.200s; want the handler's own 201 (its completion landed)", r.StatusCode, r.Body)
				}
				for range 2 {
					r = call(t, h, ev)
					if c.body == big {
						notKeptAnswer(t, r, 201, len(big))
					} else if r.StatusCode != 201 || r.Body != c.body || !replayed(r.Headers) {
						t.Fatalf("retry %d %.200s; want the replay", r.StatusCode, r.Body)
					}
				}
				if runs != 1 {
					t.Fatalf("handler ran %d times, want once", runs)
				}
				if c.chunks > 0 && v.chunkItems(t) == 0 {
					t.Fatal("the response was not stored in chunk items; the test injects nothing it means to")
				}
			})
		}

		t.Run("Once", func(t *testing.T) {
			v.f.Clear()
			runs := 0
			w := idem.Work{Key: newKey(), Operation: "charge", Payload: []byte(`{"a":1}`),
				Run: func(context.Context) ([]byte, error) { runs++; return []byte(`{"charged":true}`), nil }}
			v.f.PassNext("PutItem", 1)
			v.f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
			val, ran, err := g.Once(ctxT(t), w)
			v.f.Clear()
			if err != nil || !ran || string(val) != `{"charged":true}` {
				t.Fatalf("Once = %q, ran %t, %v; want the value, ran, no error", val, ran, err)
			}
			val, ran, err = g.Once(ctxT(t), w)
			if err != nil || ran || string(val) != `{"charged":true}` || runs != 1 {
				t.Fatalf("Once again = %q, ran %t, %v (runs %d); want the recorded value, not run", val, ran, err, runs)
			}
		})

		t.Run("not landed", func(t *testing.T) {
			// Throttled past the SDK's retries (nothing written): 503, the
			// record left claimed, so the retry is in flight, never a
			// second execution.
			v.f.Clear()
			runs := 0
			h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"run":"r-1"}`}, nil
			})
			ev := guardEvent(newKey(), `{"a":1}`)
			v.f.PassNext("PutItem", 1)
			v.f.FailNext("PutItem", 3, dynamotest.Throttle())
			want503(t, call(t, h, ev))
			v.f.Clear()
			r := call(t, h, ev)
			if r.StatusCode != 409 || !strings.Contains(r.Body, "idempotency_in_flight") || runs != 1 {
				t.Fatalf("retry %d %s (runs %d); want 409 in flight, the handler run once", r.StatusCode, r.Body, runs)
			}
		})
	})
}
