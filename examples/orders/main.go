// Command orders is an AWS Lambda function that uses idem on one DynamoDB
// table: an idempotent HTTP API handler (POST /orders), an idempotent SQS
// consumer (ORDERS_HANDLER=sqs); mux.go serves POST /orders with net/http.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/event"
	"github.com/idemkit/idemkit/idem/idemenv"
)

func main() {
	createOrder, shipOrders, err := handlers(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	if os.Getenv("ORDERS_HANDLER") == "sqs" {
		lambda.Start(shipOrders)
	} else {
		lambda.Start(createOrder)
	}
}

// handlers builds the HTTP API handler and the SQS consumer.
func handlers(ctx context.Context) (idem.HTTPAPIHandler, event.SQSHandler, error) {
	guard, err := newGuard(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Each message once, keyed by its MessageId; only failed ones go back to SQS (ReportBatchItemFailures).
	consumer, err := event.SQS(guard, event.SQSConfig{Operation: "ship-order"}, shipOrder)
	if err != nil {
		return nil, nil, err
	}
	return guard.HTTPAPI(placeOrder), consumer, nil
}

// newGuard builds the guard on the table named by IDEMPOTENCY_TABLE.
func newGuard(ctx context.Context) (*idem.Guard, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if ep := os.Getenv("DYNAMODB_ENDPOINT"); ep != "" { // idemkit dev's engine, LocalStack
			o.BaseEndpoint = aws.String(ep)
			o.DisableValidateResponseChecksum = true // DynamoDB Local's error CRC32s are wrong
		}
	})
	store, err := dynamostore.New(dynamostore.Config{Client: client, Table: os.Getenv("IDEMPOTENCY_TABLE")})
	if err != nil {
		return nil, err
	}
	env, err := idemenv.Load(os.Getenv) // IDEMPOTENCY_ENABLED, _REQUIRED, _POLICY, _PROCESSING_LEASE_SECONDS, _RETENTION_HOURS, _WAIT_MS, _STORE_TIMEOUT_MS, _DERIVED_KEYS, _KEY_HASH_SECRET
	if err != nil {
		return nil, err
	}
	guardConfig := idem.Config{
		Store: store,
		// Required. No authorizer in front of this function, so one tenant; behind
		// one: idem.AuthorizerKey("tenantId"), JWTClaim("sub") or IAMPrincipal().
		Tenant: idem.SingleTenant("orders"),
	}
	env.Apply(&guardConfig)
	return idem.New(guardConfig)
}

// placeOrder runs once per Idempotency-Key: a retry gets its response replayed (OpenWOP-Idempotent-Replay: true).
func placeOrder(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var in struct {
		Item string `json:"item"`
		Qty  int    `json:"qty"`
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded { // API Gateway encodes a body it takes for binary; the guard refused bad base64
		body, _ = base64.StdEncoding.DecodeString(ev.Body)
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Item == "" || in.Qty < 1 {
		return events.APIGatewayV2HTTPResponse{StatusCode: 400, Headers: map[string]string{"Content-Type": "application/json"},
			Body: `{"error":"validation_error","message":"item and qty >= 1 are required"}`}, nil
	}
	orderID := fmt.Sprintf("ord_%d", time.Now().UnixNano())
	out, _ := json.Marshal(map[string]any{"orderId": orderID, "item": in.Item, "qty": in.Qty})
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(out)}, nil
}

// shipments counts shipOrder's runs (for the local try-out).
var shipments atomic.Int64

// shipOrder runs once per message: an error leaves it to SQS's redelivery; a success is never repeated.
func shipOrder(ctx context.Context, m events.SQSMessage) error {
	shipments.Add(1)
	log.Printf("shipping message %s", m.MessageId) // never the body: it carries the order
	return nil
}
