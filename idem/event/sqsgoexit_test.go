package event_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem/event"
)

// A record whose fn ends its goroutine (runtime.Goexit: testing's FailNow
// called from fn, a library that ends its goroutine so) never returned an
// outcome: it is reported for redelivery, never acknowledged as done, and
// the records beside it are processed as usual (in a FIFO queue, those
// after it are reported unprocessed, as after any failure); its
// redelivery runs fn again (Guard.Once released its claim). Before
// (RED_TEAM 450), with Concurrency above 1 the worker's goroutine ended
// without marking the record, which was acknowledged: SQS deleted a
// message whose work never ran to its end; processed in order, the
// handler's own goroutine ended, and its invocation with it (the whole
// batch redelivered).
func TestSQSRecordWhoseFnEndsItsGoroutineIsReported(t *testing.T) {
	for _, tc := range []struct {
		name, arn, want string
		conc            int
		runs            int32 // after the redelivery
	}{
		{"standard, concurrency 3", "arn:aws:sqs:us-east-1:1:orders", "m-2", 3, 4},
		{"standard, in order", "arn:aws:sqs:us-east-1:1:orders", "m-2", 1, 4},
		{"FIFO", "arn:aws:sqs:us-east-1:1:orders.fifo", "m-2,m-3", 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			returned := false
			finished := make(chan struct{})
			go func() {
				// On a goroutine of its own: before the fix the
				// handler's goroutine could end without returning.
				defer close(finished)
				testRecordGoexit(t, tc.arn, tc.want, tc.conc, tc.runs)
				returned = true
			}()
			<-finished
			if !returned && !t.Failed() {
				t.Fatal("the handler ended its caller's goroutine: it never returned its batch response")
			}
		})
	}
}

func testRecordGoexit(t *testing.T, arn, want string, conc int, wantRuns int32) {
	e := newEnv(t, nil)
	var runs atomic.Int32
	var exitOnce atomic.Bool
	exitOnce.Store(true)
	h, cerr := event.SQS(e.guard, event.SQSConfig{Operation: "ship", Concurrency: conc}, func(_ context.Context, m events.SQSMessage) error {
		runs.Add(1)
		if m.MessageId == "m-2" && exitOnce.CompareAndSwap(true, false) {
			runtime.Goexit()
		}
		return nil
	})
	if cerr != nil {
		t.Error(cerr)
		return
	}
	batch := sqsBatch(arn, "1", "2", "3")
	r, err := h(context.Background(), batch)
	if err != nil || failedIDs(r) != want {
		t.Errorf("failures %q %v; want %s (m-2's fn never returned)", failedIDs(r), err, want)
		return
	}
	if logs := e.logs.String(); !strings.Contains(logs, `"message_id":"m-2"`) || !strings.Contains(logs, "runtime.Goexit") {
		t.Errorf("the record's end is not logged with its message id:\n%s", logs)
	}
	if r, err = h(context.Background(), batch); err != nil || failedIDs(r) != "" || runs.Load() != wantRuns {
		t.Errorf("redelivery: failures %q %v, fn ran %d times; want %d runs (m-2 run again, the others once)", failedIDs(r), err, runs.Load(), wantRuns)
	}
}
