package main

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// API Gateway hands the function a body base64-encoded (IsBase64Encoded)
// when it takes the request's content type for binary (a JSON body sent
// as application/vnd.api+json, or with no Content-Type): the order is
// placed as the same body sent as text is, not refused with a 400 that
// blames the client (RED_TEAM 476: placeOrder parsed the base64 text and
// answered "item and qty >= 1 are required"). The answers for a client's
// mistakes stay 400 in the error envelope. Handler behaviour only: the
// in-memory store is enough.
func TestPlaceOrderReadsTheBodyAPIGatewayEncoded(t *testing.T) {
	guard, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("orders")})
	if err != nil {
		t.Fatal(err)
	}
	createOrder := guard.HTTPAPI(placeOrder)
	post := func(key, body string, b64 bool) events.APIGatewayV2HTTPResponse {
		t.Helper()
		resp, err := createOrder(context.Background(), events.APIGatewayV2HTTPRequest{
			RouteKey:        "POST /orders",
			Headers:         map[string]string{"idempotency-key": key, "content-type": "application/vnd.api+json"},
			Body:            body,
			IsBase64Encoded: b64,
			RequestContext:  events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	order := `{"item":"book","qty":2}`
	if resp := post("body-test-base64-order-1", base64.StdEncoding.EncodeToString([]byte(order)), true); resp.StatusCode != 201 || !strings.Contains(resp.Body, `"item":"book"`) {
		t.Fatalf("a base64-encoded order: %d %s", resp.StatusCode, resp.Body)
	}
	for key, body := range map[string]string{
		"body-test-base64-bad-qty-1": `{"item":"book","qty":0}`,
		"body-test-base64-no-item-1": `{"qty":1}`,
		"body-test-base64-array-01":  `[1,2]`,
	} {
		for _, b64 := range []bool{false, true} {
			sent := body
			if b64 {
				sent = base64.StdEncoding.EncodeToString([]byte(body))
			}
			resp := post(key+map[bool]string{false: "t", true: "b"}[b64], sent, b64)
			if resp.StatusCode != 400 || !strings.HasPrefix(resp.Body, `{"error":"validation_error","message":`) {
				t.Errorf("%s (base64 %v): %d %s, want 400 validation_error", body, b64, resp.StatusCode, resp.Body)
			}
		}
	}
}
