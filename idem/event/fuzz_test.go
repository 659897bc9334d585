package event_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/event"
	"github.com/idemkit/idemkit/idem/memstore"
)

// FuzzSQSBatch delivers SQS batches decoded from fuzzed JSON (records with
// any messageId, body, eventSourceARN and attributes: standard or FIFO
// queues, repeated or empty ids, bodies that are not the JSON the key
// function reads) twice, keyed by the message id or by an orderId read
// from the body. fn fails a body holding "fail" and panics on "panic".
// Whatever arrives: the handler neither panics nor returns an error
// (which would redeliver the whole batch); every reported identifier is a
// record's messageId; a record not reported has its key done (fn returned
// nil for it, in this delivery or an earlier one), so acknowledging it
// loses nothing; and fn never returns nil twice for one key.
func FuzzSQSBatch(f *testing.F) {
	f.Add([]byte(`{"Records":[{"messageId":"059f36b4-87a3-44ab-83d2-661975830a7d","receiptHandle":"AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a","body":"{\"orderId\":\"o-1\"}","attributes":{"ApproximateReceiveCount":"1","SentTimestamp":"1545082649183","SenderId":"AIDAIENQZJOLO23YVJ4VO","ApproximateFirstReceiveTimestamp":"1545082649185"},"messageAttributes":{},"md5OfBody":"e4e68fb7bd0e697a0ae8f1bb342846b3","eventSource":"aws:sqs","eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:my-queue","awsRegion":"us-east-2"}]}`), false, 1)
	f.Add([]byte(`{"Records":[{"messageId":"11d6ee51-4cc7-4302-9e22-7cd8afdaadf5","body":"{\"orderId\":\"o-1\"}","attributes":{"MessageGroupId":"g1","MessageDeduplicationId":"d1","SequenceNumber":"1"},"eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:orders.fifo"},{"messageId":"2","body":"fail","attributes":{"MessageGroupId":"g1"},"eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:orders.fifo"},{"messageId":"3","body":"{\"orderId\":\"o-3\"}","attributes":{"MessageGroupId":"g2"},"eventSourceARN":"arn:aws:sqs:us-east-2:123456789012:orders.fifo"}]}`), true, 1)
	f.Add([]byte(`{"Records":[{"messageId":"a","body":"{\"orderId\":\"o-1\"}"},{"messageId":"a","body":"{\"orderId\":\"o-1\"}"},{"messageId":"b","body":"{\"orderId\":\"o-1\",\"qty\":2}"}]}`), true, 3)
	f.Add([]byte(`{"Records":[{"messageId":"","body":""},{"messageId":"x","body":"not json"},{"messageId":"y","body":"{\"orderId\":\"\"}"},{"messageId":"z","body":"panic"}]}`), true, 2)
	f.Add([]byte(`{"Records":[{"messageId":"p","body":"panic"},{"messageId":"q","body":"{\"orderId\":\"fail\"}"}]}`), false, 4)
	f.Add([]byte(`{"Records":[{"messageId":"s","body":"{\"orderId\":{\"nested\":1}}","eventSourceARN":".fifo","attributes":{}}]}`), true, 1)
	f.Add([]byte(`{"Records":[]}`), false, 1)
	f.Add([]byte(`{"Records":null}`), false, 0)
	f.Fuzz(func(t *testing.T, data []byte, byBody bool, conc int) {
		var ev events.SQSEvent
		if json.Unmarshal(data, &ev) != nil || len(ev.Records) > 20 {
			return
		}
		conc = min(max(conc, 0), 4)
		g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"), Wait: -1,
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		keyOf := func(m events.SQSMessage) (string, error) { return m.MessageId, nil }
		if byBody {
			keyOf = func(m events.SQSMessage) (string, error) {
				var b struct {
					OrderID string `json:"orderId"`
				}
				if err := json.Unmarshal([]byte(m.Body), &b); err != nil {
					return "", err
				}
				return b.OrderID, nil
			}
		}
		var mu sync.Mutex
		done := map[string]int{}
		cfg := event.SQSConfig{Operation: "ship", Concurrency: conc}
		if byBody {
			cfg.Key = keyOf
		}
		h, err := event.SQS(g, cfg, func(_ context.Context, m events.SQSMessage) error {
			if strings.Contains(m.Body, "panic") {
				panic("fuzz: " + m.MessageId)
			}
			if strings.Contains(m.Body, "fail") {
				return errors.New("fuzz: failed")
			}
			k, _ := keyOf(m)
			mu.Lock()
			done[k]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for delivery := 0; delivery < 2; delivery++ {
			resp, err := h(context.Background(), ev)
			if err != nil {
				t.Fatalf("delivery %d: the handler returned %v (the whole batch is redelivered)", delivery, err)
			}
			reported := map[string]bool{}
			for _, f := range resp.BatchItemFailures {
				found := false
				for _, r := range ev.Records {
					found = found || r.MessageId == f.ItemIdentifier
				}
				if !found {
					t.Fatalf("delivery %d reports %q, no record's messageId", delivery, f.ItemIdentifier)
				}
				reported[f.ItemIdentifier] = true
			}
			for _, r := range ev.Records {
				if reported[r.MessageId] {
					continue
				}
				k, err := keyOf(r)
				if err != nil || k == "" {
					t.Fatalf("delivery %d acknowledges %q whose key cannot be read (%v)", delivery, r.MessageId, err)
				}
				if done[k] == 0 {
					t.Fatalf("delivery %d acknowledges %q, whose key never completed", delivery, r.MessageId)
				}
			}
			for k, n := range done {
				if n > 1 {
					t.Fatalf("fn completed %d times for key %q", n, k)
				}
			}
		}
	})
}
