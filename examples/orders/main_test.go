package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestTryLocally sends each handler its input twice against a local
// DynamoDB, as a retry would: the second order is a replay of the first
// (API Gateway and net/http alike), and no message ships twice.
func TestTryLocally(t *testing.T) {
	if os.Getenv("DYNAMODB_ENDPOINT") == "" {
		t.Skip("set DYNAMODB_ENDPOINT to the DynamoDB endpoint idemkit dev prints, and IDEMPOTENCY_TABLE=idemkit-IdempotencyTable")
	}
	ctx := context.Background()
	createOrder, shipOrders, err := handlers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	guard, _ := newGuard(ctx)
	key := fmt.Sprintf("try-%d-local", time.Now().UnixNano()) // 22..128 of A-Z a-z 0-9 . _ ~ -
	t.Run("API Gateway", func(t *testing.T) {
		ev := events.APIGatewayV2HTTPRequest{
			RouteKey:       "POST /orders",
			Headers:        map[string]string{"idempotency-key": key, "content-type": "application/json"},
			Body:           `{"item":"book","qty":1}`,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}},
		}
		for i := range 2 {
			resp, err := createOrder(ctx, ev)
			t.Logf("POST /orders: %d %s replay=%q", resp.StatusCode, resp.Body, resp.Headers["Openwop-Idempotent-Replay"])
			if err != nil || resp.StatusCode != 201 || (i == 1) != (resp.Headers["Openwop-Idempotent-Replay"] == "true") {
				t.Fatalf("attempt %d: %v %v", i+1, err, resp.Headers)
			}
		}
	})
	t.Run("net/http", func(t *testing.T) {
		srv := httptest.NewServer(newMux(guard))
		defer srv.Close()
		for i := range 2 {
			req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{"item":"pen","qty":2}`))
			req.Header.Set("Idempotency-Key", key+"-mux")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			replay := resp.Header.Get("Openwop-Idempotent-Replay")
			t.Logf("net/http POST /orders: %d %s replay=%q", resp.StatusCode, strings.TrimSpace(string(body)), replay)
			if resp.StatusCode != 201 || (i == 1) != (replay == "true") {
				t.Fatalf("attempt %d: %d %s", i+1, resp.StatusCode, body)
			}
		}
	})
	t.Run("SQS", func(t *testing.T) {
		batch := events.SQSEvent{Records: []events.SQSMessage{
			{MessageId: key + "-1", Body: `{"order":"1"}`},
			{MessageId: key + "-2", Body: `{"order":"2"}`},
		}}
		before := shipments.Load()
		for range 2 { // the second delivery is SQS redelivering the batch
			resp, err := shipOrders(ctx, batch)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("batch: %v %v", resp.BatchItemFailures, err)
			}
		}
		t.Logf("SQS: 2 messages delivered twice, shipped %d", shipments.Load()-before)
		if shipments.Load()-before != 2 {
			t.Fatalf("shipped %d, want 2", shipments.Load()-before)
		}
	})
}
