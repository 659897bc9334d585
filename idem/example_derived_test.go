package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A route whose callers send no Idempotency-Key derives its key from the
// request (here the body's "orderId"), under a policy that allows derived
// keys: a retry is a replay, and the same order with another payload is a
// mismatch, as with a caller's key.
func ExampleRoute_deriveKey() {
	policy := idem.PolicyOpenWOP
	policy.Name = "orders"
	policy.DerivedKeys = true
	g, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.AuthorizerKey("tenantId"),
		Policy: policy,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Routes: map[string]idem.Route{"POST /orders": {
			DeriveKey: func(body []byte, _ func(string) []string) (string, error) {
				var order struct {
					ID string `json:"orderId"`
				}
				err := json.Unmarshal(body, &order)
				return order.ID, err
			},
		}},
	})
	if err != nil {
		panic(err)
	}
	runs := 0
	place := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"charge":"ch_%d"}`, runs)}, nil
	})
	order := func(body string) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /orders",
			Headers:  map[string]string{"content-type": "application/json"}, // no Idempotency-Key
			Body:     body,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
				Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}},
			},
		}
	}
	first, _ := place(context.Background(), order(`{"orderId":"ord-42","qty":1}`))
	retry, _ := place(context.Background(), order(`{"orderId":"ord-42","qty":1}`))
	other, _ := place(context.Background(), order(`{"orderId":"ord-42","qty":2}`))
	fmt.Println(first.StatusCode, first.Body)
	fmt.Println(retry.StatusCode, retry.Body, retry.Headers["Openwop-Idempotent-Replay"])
	fmt.Println(other.StatusCode)
	fmt.Println("charges:", runs)
	// Output:
	// 201 {"charge":"ch_1"}
	// 201 {"charge":"ch_1"} true
	// 409
	// charges: 1
}

// The derived-key mode in a function's Config, as docs/POLICIES.md shows
// it: a webhook route keyed by the sender's own event id,
// under the OpenWOP policy with derived keys on (in code, or with
// IDEMPOTENCY_DERIVED_KEYS=true read by idemenv). A caller's
// Idempotency-Key routes are unchanged.
func ExampleRoute_deriveKeyInConfig() {
	policy := idem.PolicyOpenWOP
	policy.DerivedKeys = true // or IDEMPOTENCY_DERIVED_KEYS=true, applied by idemenv.Env.Apply
	guard, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("orders"), Policy: policy,
		Routes: map[string]idem.Route{"POST /payment-events": {
			DeriveKey: func(body []byte, _ func(string) []string) (string, error) {
				var ev struct{ EventID string } // the sender's own id: a resend is a replay
				err := json.Unmarshal(body, &ev)
				return ev.EventID, err
			},
		}}})
	fmt.Println(guard != nil, err)
	// Output: true <nil>
}
