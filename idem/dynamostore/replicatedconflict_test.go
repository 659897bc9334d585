package dynamostore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// A write of the Guard's path (the claim, the completion) refused by an
// MRSC table with ReplicatedWriteConflictException (it met a write of the
// same item in another Region; the SDK does not retry it, and nothing was
// written) is a store outage: the request is answered exactly as when the
// same write is throttled past the SDK's retries (503 store unavailable,
// Retry-After), and the retry is answered the same way too: never a 500,
// never the handler run twice for one completion. On the emulators.
func TestReplicatedWriteConflictIsAnOutage(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := unavailableGuard(t, v.s)
		for _, c := range []struct {
			name string
			pass int // PutItems let through before the refused one
		}{{"claim", 0}, {"completion", 1}} {
			t.Run(c.name, func(t *testing.T) {
				outcome := func(fault func()) string {
					v.f.Clear()
					var runs atomic.Int32
					h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
						runs.Add(1)
						return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"n":1}`}, nil
					})
					ev := guardEvent(newKey(), `{"a":1}`)
					v.f.PassNext("PutItem", c.pass)
					fault()
					first := call(t, h, ev)
					v.f.Clear()
					again := call(t, h, ev)
					var env struct{ Error string }
					_ = json.Unmarshal([]byte(first.Body), &env)
					return fmt.Sprintf("first %d %q retry-after %t; runs %d; again %d replayed %t; runs %d",
						first.StatusCode, env.Error, first.Headers["Retry-After"] != "", runs.Load()-boolInt(again.StatusCode == 201 && !replayed(again.Headers)),
						again.StatusCode, replayed(again.Headers), runs.Load())
				}
				throttled := outcome(func() { v.f.FailNext("PutItem", 20, dynamotest.Throttle()) })
				refused := outcome(func() {
					v.f.FailNext("PutItem", 1, &types.ReplicatedWriteConflictException{Message: aws.String("injected: the item is being modified by a request in another Region")})
				})
				if refused != throttled {
					t.Fatalf("%s refused for another Region's write: %s\nthrottled past the retries: %s\nwant the same answers", c.name, refused, throttled)
				}
				if want := "first 503"; refused[:len(want)] != want {
					t.Fatalf("%s refused: %s; want 503", c.name, refused)
				}
			})
		}
	})
}

func boolInt(b bool) int32 {
	if b {
		return 1
	}
	return 0
}
