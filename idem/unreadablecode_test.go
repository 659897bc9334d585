package idem_test

import (
	"context"
	"encoding/base64"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// TestErrorAnswerInACodingTheGuardCannotReadIsNeverFinalByItsCode: an
// API Gateway handler that encodes its own error answer in a coding the
// standard library does not read (br, zstd) hides its envelope code from
// the Guard. The decision never depends on that unread code: where the
// policy decides the status by its code (the OpenWOP default forgets a
// 400 validation_error and replays other 400s; the commerce policy
// retries a 503 idemkit.store_unavailable and replays other 503s), the
// answer is not kept as final (forgotten, or released for a retry), so a
// corrected body under the key runs and a store outage's 503 is never
// replayed; where the status alone decides (a 404, a 500 under the OpenWOP
// default), the policy's decision stands.
func TestErrorAnswerInACodingTheGuardCannotReadIsNeverFinalByItsCode(t *testing.T) {
	for _, c := range []struct {
		name     string
		commerce bool
		status   int
		coding   string
		reran    bool // the same key's next request runs the handler again
	}{
		{"openwop 400 br", false, 400, "br", true},
		{"openwop 400 zstd", false, 400, "zstd", true},
		{"openwop 404 br", false, 404, "br", false},
		{"openwop 500 br", false, 500, "br", true},
		{"commerce 503 br", true, 503, "br", true},
		{"commerce 500 br", true, 500, "br", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) {
				if c.commerce {
					cfg.Policy = commerce.Policy
				}
			})
			var runs atomic.Int32
			h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				n := runs.Add(1)
				if n > 1 {
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"id":"r-1"}`}, nil
				}
				// The coded bytes stand in for br or zstd: the Guard
				// reads neither.
				return events.APIGatewayV2HTTPResponse{StatusCode: c.status,
					Headers:         map[string]string{"Content-Type": "application/json", "Content-Encoding": c.coding},
					Body:            base64.StdEncoding.EncodeToString([]byte{0x1b, 0x0a, 0x00, 0xf8, 0xa5, 0x40}),
					IsBase64Encoded: true}, nil
			})
			event := func() events.APIGatewayV2HTTPRequest {
				if c.commerce {
					return commerceEvent("POST", "POST /runs", testKey, `{"a":1}`)
				}
				return v2event("POST", "POST /runs", testKey, `{"a":1}`)
			}
			if r, err := h(context.Background(), event()); err != nil || r.StatusCode != c.status {
				t.Fatalf("first: %d %v", r.StatusCode, err)
			}
			r, err := h(context.Background(), event())
			if err != nil {
				t.Fatal(err)
			}
			if c.reran {
				if r.StatusCode != 201 || runs.Load() != 2 {
					t.Fatalf("second: %d, runs %d; want the handler run again (201)", r.StatusCode, runs.Load())
				}
				return
			}
			if r.StatusCode != c.status || runs.Load() != 1 {
				t.Fatalf("second: %d, runs %d; want the recorded %d replayed", r.StatusCode, runs.Load(), c.status)
			}
		})
	}
}
