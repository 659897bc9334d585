package event_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/event"
	"github.com/idemkit/idemkit/idem/idemtest"
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

// A record is not started once less than the Guard's WaitMargin is left
// before the invocation's deadline: that margin is kept free to return
// the partial batch response. Started, the record (its claim, fn, its
// completion) runs past the deadline, Lambda ends the invocation as timed
// out and discards the response, and SQS redelivers the whole batch, the
// records already done among it. Such records are reported for
// redelivery, logged with outcome deadline, without a store call. Before,
// m-2 and m-3 were started with 150 ms left (of the default 250 ms
// margin) and the handler returned after its deadline.
func TestSQSRecordsInsideTheWaitMarginAreNotStarted(t *testing.T) {
	e := newEnv(t, nil)
	// WaitMargin 2 s (250 ms by default): m-1 leaves 1.9 s, inside the
	// margin, so that the handler's own return after it (m-1's
	// completion, two log lines) fits however loaded the machine is.
	g, err := idem.New(idem.Config{Store: e.store, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}},
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Wait: time.Minute, WaitMargin: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var runs atomic.Int32
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship"}, func(context.Context, events.SQSMessage) error {
		runs.Add(1)
		time.Sleep(time.Until(deadline) - 1900*time.Millisecond) // leaves 1.9 s, less than the 2 s margin
		return nil
	})
	r, err := h(ctx, sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2", "3"))
	if err != nil || failedIDs(r) != "m-2,m-3" || runs.Load() != 1 {
		t.Fatalf("failures %q %v runs %d; want m-2,m-3 not started", failedIDs(r), err, runs.Load())
	}
	if n := e.store.Len(); n != 1 {
		t.Errorf("%d records stored; want m-1's alone", n)
	}
	if !time.Now().Before(deadline) {
		t.Errorf("the handler returned %v after its deadline", time.Since(deadline))
	}
	if logs := e.logs.String(); strings.Count(logs, `"outcome":"deadline"`) != 2 {
		t.Errorf("want m-2 and m-3 logged with outcome deadline; logs:\n%s", logs)
	}
}

// A record started in time whose fn runs until its context ends (a slow
// downstream, a call that honours ctx) must still leave the handler the
// WaitMargin to return the partial batch response: fn's context ends that
// margin before the invocation's deadline. Before, fn's context ended at
// the deadline itself, the handler returned after it, and in Lambda the
// invocation timed out: its response discarded, one slow record made SQS
// redeliver the whole batch, the records done and those not started
// among it, each receive counting toward the redrive policy. The record is
// reported, its claim released, and its redelivery runs fn again.
func TestSQSRecordRunningToItsDeadlineLeavesTimeForTheResponse(t *testing.T) {
	for _, conc := range []int{1, 3} {
		t.Run(fmt.Sprint("concurrency ", conc), func(t *testing.T) {
			e := newEnv(t, nil)
			// WaitMargin 1 s (250 ms by default): the time left after fn
			// for the release and the answer does not depend on how
			// loaded the machine is.
			g, err := idem.New(idem.Config{Store: e.store, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}},
				Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Wait: time.Minute, WaitMargin: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			deadline, _ := ctx.Deadline()
			var runs atomic.Int32
			slow := func(ctx context.Context, m events.SQSMessage) error {
				runs.Add(1)
				if m.MessageId == "m-1" {
					<-ctx.Done() // runs as long as its context lets it
					return ctx.Err()
				}
				return nil
			}
			h, _ := event.SQS(g, event.SQSConfig{Operation: "ship", Concurrency: conc}, slow)
			r, err := h(ctx, sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1"))
			if left := time.Until(deadline); left <= 0 {
				t.Fatalf("the handler returned %v after its deadline: Lambda would discard its response and redeliver the whole batch", -left)
			}
			if err != nil || failedIDs(r) != "m-1" {
				t.Fatalf("failures %q %v; want m-1 reported", failedIDs(r), err)
			}
			// Redelivered: the claim was released, fn runs again.
			h2, _ := event.SQS(g, event.SQSConfig{Operation: "ship", Concurrency: conc}, func(context.Context, events.SQSMessage) error { runs.Add(1); return nil })
			if r, err := h2(context.Background(), sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1")); err != nil || failedIDs(r) != "" || runs.Load() != 2 {
				t.Fatalf("redelivery: failures %q %v runs %d; want m-1 run again and acknowledged", failedIDs(r), err, runs.Load())
			}
		})
	}
}
