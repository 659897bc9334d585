package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A handler wrapped by HTTPAPI runs once per (tenant, route, key); a retry
// gets the cached response with the replay marker.
func ExampleGuard_HTTPAPI() {
	g, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.AuthorizerKey("tenantId"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	runs := 0
	create := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"runId":"run_%d"}`, runs)}, nil
	})
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /runs",
		Headers:  map[string]string{"idempotency-key": "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6c", "content-type": "application/json"},
		Body:     `{"workflow":"wf_1"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}},
		},
	}
	first, _ := create(context.Background(), ev)
	retry, _ := create(context.Background(), ev)
	fmt.Println(first.StatusCode, first.Body, first.Headers["Openwop-Idempotent-Replay"] == "")
	fmt.Println(retry.StatusCode, retry.Body, retry.Headers["Openwop-Idempotent-Replay"])
	ev.Body = `{"workflow":"wf_2"}`
	other, _ := create(context.Background(), ev)
	fmt.Println(other.StatusCode, other.Body)
	fmt.Println("handler runs:", runs)
	// Output:
	// 201 {"runId":"run_1"} true
	// 201 {"runId":"run_1"} true
	// 409 {"error":"idempotency_key_mismatch","message":"The Idempotency-Key has already been used with a different request payload."}
	// handler runs: 1
}

// Transact commits a handler's business writes in the same fenced
// transaction as the completion record.
func ExampleTransact() {
	store := memstore.New()
	g, _ := idem.New(idem.Config{Store: store, Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	h := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		// With dynamostore this is a types.TransactWriteItem.
		if err := idem.Transact(ctx, memstore.Write{Key: "order#1", Value: []byte(ev.Body), IfAbsent: true}); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"order":"1"}`}, nil
	})
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /orders",
		Headers:  map[string]string{"idempotency-key": "order-0001-abcdefghijklmnop"},
		Body:     "qty=1",
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}},
		},
	}
	h(context.Background(), ev)
	h(context.Background(), ev)
	v, ok := store.Item("order#1")
	fmt.Println(string(v), ok)
	// Output:
	// qty=1 true
}

// A handler that routes by itself behind the catch-all route runs each
// request under the Guard with the operation it matched: the operation
// scopes the record, so one key on two orders' cancel runs twice.
func ExampleGuard_Do() {
	g, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	runs := 0
	cancel := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest, order string) (events.APIGatewayV2HTTPResponse, error) {
		return g.Do(ctx, idem.Request{Event: ev, Operation: "POST /orders/" + order + "/cancel"}, func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"cancelled":"` + order + `"}`}, nil
		})
	}
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: "$default",
		Headers:  map[string]string{"idempotency-key": "cancel-0001-abcdefghijklmnop"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}},
		},
	}
	a, _ := cancel(context.Background(), ev, "o1")
	again, _ := cancel(context.Background(), ev, "o1")
	b, _ := cancel(context.Background(), ev, "o2")
	fmt.Println(a.Body, again.Headers["Openwop-Idempotent-Replay"], b.Body)
	fmt.Println("handler runs:", runs)
	// Output:
	// {"cancelled":"o1"} true {"cancelled":"o2"}
	// handler runs: 2
}

// Once runs one unit of work per key: an error is never recorded, so the
// next call runs the work again; a recorded value is handed back to every
// later call without running it.
func ExampleGuard_Once() {
	g, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	runs := 0
	charge := idem.Work{Operation: "charge-order", Key: "order-42", Payload: []byte(`{"amount":1200}`),
		Run: func(context.Context) ([]byte, error) {
			runs++
			if runs == 1 {
				return nil, fmt.Errorf("card network timeout")
			}
			return []byte(`{"charge":"ch_1"}`), nil
		}}
	for range 3 {
		v, ran, err := g.Once(context.Background(), charge)
		fmt.Printf("value=%s ran=%v err=%v\n", v, ran, err)
	}
	other := charge
	other.Payload = []byte(`{"amount":9900}`)
	_, _, err := g.Once(context.Background(), other)
	fmt.Println(errors.Is(err, idem.ErrPayloadMismatch), "runs:", runs)
	// Output:
	// value= ran=true err=card network timeout
	// value={"charge":"ch_1"} ran=true err=<nil>
	// value={"charge":"ch_1"} ran=false err=<nil>
	// true runs: 2
}

// A value larger than MaxResponseBytes is returned to the call that ran
// the work and recorded as not kept: a duplicate gets ErrNotKept and the
// work never runs again for the key.
func ExampleGuard_Once_notKept() {
	g, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	runs := 0
	export := idem.Work{Operation: "export-orders", Key: "export-2030-01", Payload: []byte(`{"month":"2030-01"}`),
		Run: func(context.Context) ([]byte, error) {
			runs++
			return []byte(`"` + strings.Repeat("x", idem.MaxResponseBytes) + `"`), nil
		}}
	v, ran, err := g.Once(context.Background(), export)
	fmt.Println(len(v), ran, err)
	v, ran, err = g.Once(context.Background(), export)
	fmt.Println(len(v), ran, errors.Is(err, idem.ErrNotKept), "runs:", runs)
	// Output:
	// 6291458 true <nil>
	// 0 false true runs: 1
}
