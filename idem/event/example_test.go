package event_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/event"
	"io"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// Event makes any event handler idempotent: here an EventBridge-style
// event keyed by its id. The value is cached and replayed to every later
// delivery; an error is never cached.
func ExampleFunc() {
	g, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.SingleTenant("billing"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	type Invoice struct {
		ID     string `json:"id"`
		Amount int    `json:"amount"`
	}
	type Receipt struct {
		Charge string `json:"charge"`
	}
	charges := 0
	charge, err := event.Func(g, event.Config[Invoice]{
		Operation: "charge-invoice",
		Key:       func(in Invoice) (string, error) { return in.ID, nil },
	}, func(ctx context.Context, in Invoice) (Receipt, error) {
		charges++
		return Receipt{Charge: fmt.Sprintf("ch_%d", charges)}, nil
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	r1, err := charge(ctx, Invoice{ID: "inv-1", Amount: 500})
	fmt.Println(r1.Charge, err)
	r2, err := charge(ctx, Invoice{ID: "inv-1", Amount: 500}) // redelivered
	fmt.Println(r2.Charge, err)
	_, err = charge(ctx, Invoice{ID: "inv-1", Amount: 900}) // same key, other payload
	fmt.Println(errors.Is(err, idem.ErrPayloadMismatch))
	fmt.Println("charges:", charges)
	// Output:
	// ch_1 <nil>
	// ch_1 <nil>
	// true
	// charges: 1
}

// SQS processes each message of a batch once and reports only the failed
// ones, so SQS redelivers those alone.
func ExampleSQS() {
	g, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.SingleTenant("shipping"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	down := true
	handler, err := event.SQS(g, event.SQSConfig{Operation: "ship-order"}, func(ctx context.Context, m events.SQSMessage) error {
		if m.MessageId == "m-2" && down {
			return errors.New("carrier API unavailable")
		}
		fmt.Println("shipped", m.Body)
		return nil
	})
	if err != nil {
		panic(err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: "order-1"}, {MessageId: "m-2", Body: "order-2"}, {MessageId: "m-3", Body: "order-3"},
	}}
	resp, _ := handler(context.Background(), batch)
	fmt.Println("failed:", resp.BatchItemFailures)
	down = false
	resp, _ = handler(context.Background(), batch) // the whole batch redelivered
	fmt.Println("failed:", resp.BatchItemFailures)
	// Output:
	// shipped order-1
	// shipped order-3
	// failed: [{m-2}]
	// shipped order-2
	// failed: []
}

// A queue whose producer puts the order id in the body and may send the
// same order twice, each time with a new sentAt. The key is the order id;
// the payload is the order's business fields only, so the second send is
// the duplicate it is (acknowledged, not shipped again) rather than a
// mismatch that fails on every delivery until it reaches the dead-letter
// queue. Another quantity under the same order id is a real mismatch.
func ExampleSQS_payload() {
	g, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	type order struct {
		ID     string `json:"orderId"`
		Qty    int    `json:"qty"`
		SentAt string `json:"sentAt"` // delivery metadata: not part of the payload
	}
	decode := func(m events.SQSMessage) (order, error) {
		var o order
		err := json.Unmarshal([]byte(m.Body), &o)
		return o, err
	}
	shipped := 0
	ship, err := event.SQS(g, event.SQSConfig{
		Operation: "ship-order",
		Key: func(m events.SQSMessage) (string, error) {
			o, err := decode(m)
			return o.ID, err
		},
		Payload: func(m events.SQSMessage) ([]byte, error) {
			o, err := decode(m)
			o.SentAt = "" // leave delivery metadata out
			b, _ := json.Marshal(o)
			return b, err
		},
	}, func(ctx context.Context, m events.SQSMessage) error {
		shipped++
		return nil
	})
	if err != nil {
		panic(err)
	}
	for i, body := range []string{
		`{"orderId":"ord-7","qty":1,"sentAt":"10:00:00"}`,
		`{"orderId":"ord-7","qty":1,"sentAt":"10:05:00"}`, // re-sent: a duplicate
		`{"orderId":"ord-7","qty":3,"sentAt":"10:06:00"}`, // another order under the id: a mismatch
	} {
		resp, _ := ship(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprint("m-", i), Body: body}}})
		fmt.Println(body, "failed:", len(resp.BatchItemFailures))
	}
	fmt.Println("shipped:", shipped)
	// Output:
	// {"orderId":"ord-7","qty":1,"sentAt":"10:00:00"} failed: 0
	// {"orderId":"ord-7","qty":1,"sentAt":"10:05:00"} failed: 0
	// {"orderId":"ord-7","qty":3,"sentAt":"10:06:00"} failed: 1
	// shipped: 1
}
