package idem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/memstore"
)

// order is the request of the example's contract: a SKU, upper-cased by
// normalisation, and a positive quantity.
type order struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// On a route with a Contract the request is decoded, normalised and
// validated once, before the claim; the handler takes the decoded request
// from its context with DecodedRequest instead of decoding the body again.
// Equal requests written differently are one request: the second is a
// replay.
func ExampleDecodedRequest() {
	decodes := 0
	contract := &idem.Contract{
		Version: "orders-v1",
		Decode: func(_ string, body []byte) (any, error) {
			decodes++
			var o order
			if err := json.Unmarshal(body, &o); err != nil {
				return nil, err
			}
			if o.Qty <= 0 {
				return nil, &canon.ValidationError{Field: "/qty", Message: "qty must be positive"}
			}
			o.SKU = strings.ToUpper(strings.TrimSpace(o.SKU))
			return o, nil
		},
	}
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"),
		Routes: map[string]idem.Route{"POST /orders": {Contract: contract}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	create := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		v, ok := idem.DecodedRequest(ctx)
		o, _ := v.(order)
		fmt.Println("handler got", o.SKU, o.Qty, ok)
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
			Body: fmt.Sprintf(`{"sku":%q,"qty":%d}`, o.SKU, o.Qty)}, nil
	})
	ev := func(body string) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /orders",
			Headers:  map[string]string{"idempotency-key": "order-0002-abcdefghijklmnop", "content-type": "application/json"},
			Body:     body,
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
				Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}},
			},
		}
	}
	first, _ := create(context.Background(), ev(`{"sku":"ab-1","qty":2}`))
	retry, _ := create(context.Background(), ev(`{ "qty": 2, "sku": " AB-1 " }`))
	bad, _ := create(context.Background(), ev(`{"sku":"ab-1","qty":0}`))
	fmt.Println(first.StatusCode, first.Body)
	fmt.Println(retry.StatusCode, retry.Body, retry.Headers["Openwop-Idempotent-Replay"])
	fmt.Println(bad.StatusCode, bad.Body)
	fmt.Println("decodes:", decodes)
	// Output:
	// handler got AB-1 2 true
	// 201 {"sku":"AB-1","qty":2}
	// 201 {"sku":"AB-1","qty":2} true
	// 400 {"error":"validation_error","message":"The request body is invalid: qty must be positive","details":{"field":"/qty"}}
	// decodes: 3
}
