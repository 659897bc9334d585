package event_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem/event"
)

// Records the invocation has no time left for are reported for
// redelivery without a store call, and logged as not started before the
// deadline, not as a store failure: an operator reading "store-unavailable"
// would look at DynamoDB for a function that ran out of time.
func TestSQSRecordsAfterTheDeadlineAreLoggedAsSuch(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs atomic.Int32
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship"}, func(context.Context, events.SQSMessage) error { runs.Add(1); return nil })
	r, err := h(ctx, sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2"))
	if err != nil || failedIDs(r) != "m-1,m-2" || runs.Load() != 0 {
		t.Fatalf("failures %q %v runs %d", failedIDs(r), err, runs.Load())
	}
	logs := e.logs.String()
	if strings.Contains(logs, "store-unavailable") || strings.Count(logs, `"outcome":"deadline"`) != 2 {
		t.Errorf("want each record logged with outcome deadline, not a store failure; logs:\n%s", logs)
	}
}

// A record whose key cannot be derived (the key function fails on a
// malformed body) is logged with outcome no-key, as one whose key is
// empty is: its input is bad, and fn never ran. Before, it was logged as
// handler-error, so an alarm on handler failures counted malformed
// messages, and a search for no-key missed them.
func TestSQSKeyErrorIsLoggedAsNoKey(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship", Key: func(m events.SQSMessage) (string, error) {
		switch m.MessageId {
		case "m-1":
			return "", errors.New("body is not an order")
		case "m-2":
			return "", nil
		}
		return m.MessageId, nil
	}}, func(_ context.Context, m events.SQSMessage) error {
		return errors.New("fn failed")
	})
	r, err := h(context.Background(), sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2", "3"))
	if err != nil || failedIDs(r) != "m-1,m-2,m-3" {
		t.Fatalf("failures %q %v", failedIDs(r), err)
	}
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		want := `"outcome":"no-key"`
		if strings.Contains(line, `"message_id":"m-3"`) {
			want = `"outcome":"handler-error"`
		}
		if !strings.Contains(line, want) {
			t.Errorf("want %s in\n%s", want, line)
		}
	}
	if !strings.Contains(e.logs.String(), "body is not an order") {
		t.Errorf("the key function's error is not logged:\n%s", e.logs.String())
	}
}
