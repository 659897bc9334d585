package dynamostore_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/event"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// On DynamoDB (the three emulators): an SQS record whose fn runs as long
// as its context lets it ends WaitMargin before the invocation's
// deadline, so its claim's release and the partial batch response both
// fit before that deadline (the record reported, the one after it not
// started), and its redelivery runs fn again. Before, fn's context ended
// at the deadline: the handler returned after it, and Lambda would have
// timed the invocation out and redelivered the whole batch. WaitMargin is
// 2 s here (250 ms by default), so that the release's store call, bounded
// by what is left of it, has time on a loaded emulator: the verdict does
// not depend on the machine's speed. The engines run at once: each one's
// time is the record's context run out.
func TestSQSRecordRunningToItsDeadlineOnDynamoDB(t *testing.T) {
	dynamotest.ForEachConcurrently(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(time.Now())
		g, err := idem.New(idem.Config{Store: v.s, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
			Wait: 5 * time.Second, WaitMargin: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		op := "ship-" + rnd(4)
		var runs sqsRuns
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		deadline, _ := ctx.Deadline()
		h, _ := event.SQS(g, event.SQSConfig{Operation: op}, func(ctx context.Context, m events.SQSMessage) error {
			runs.add(m.MessageId)
			if m.MessageId == "m-1" {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		r, err := h(ctx, batchOf("1", "2"))
		if left := time.Until(deadline); left <= 0 {
			t.Fatalf("the handler returned %v after its deadline: Lambda would discard its response and redeliver the whole batch", -left)
		}
		if err != nil || failures(r) != "m-1,m-2" || runs.String() != "map[m-1:1]" {
			t.Fatalf("failures %q %v runs %s; want m-1 reported, m-2 not started", failures(r), err, runs.String())
		}
		h2, _ := event.SQS(g, event.SQSConfig{Operation: op}, func(_ context.Context, m events.SQSMessage) error { runs.add(m.MessageId); return nil })
		if r, err := h2(ctxT(t), batchOf("1", "2")); err != nil || failures(r) != "" || runs.String() != "map[m-1:2 m-2:1]" {
			t.Fatalf("redelivery: failures %q %v runs %s; want m-1 run again, m-2 once", failures(r), err, runs.String())
		}
	})
}
