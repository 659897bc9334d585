package event_test

import (
	"context"
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
