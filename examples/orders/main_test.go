package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// TestTryLocally calls both handlers twice against a local DynamoDB: the
// second order is a replay of the first, and no message ships twice.
func TestTryLocally(t *testing.T) {
	if os.Getenv("DYNAMODB_ENDPOINT") == "" {
		t.Skip("set DYNAMODB_ENDPOINT to the DynamoDB endpoint idemkit dev prints, and IDEMPOTENCY_TABLE=idemkit-IdempotencyTable")
	}
	ctx := context.Background()
	createOrder, shipOrders, err := handlers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("try-%d-local", time.Now().UnixNano()) // 22..128 of A-Z a-z 0-9 . _ ~ -
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey:       "POST /orders",
		Headers:        map[string]string{"idempotency-key": key, "content-type": "application/json"},
		Body:           `{"item":"book","qty":1}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}},
	}
	for i := range 2 {
		resp, err := createOrder(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("POST /orders: %d %s replay=%q", resp.StatusCode, resp.Body, resp.Headers["Openwop-Idempotent-Replay"])
		if resp.StatusCode != 201 || (i == 1) != (resp.Headers["Openwop-Idempotent-Replay"] == "true") {
			t.Fatalf("attempt %d: %d %v", i+1, resp.StatusCode, resp.Headers)
		}
	}
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
}
