package dynamostore_test

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestHandlerThatEndsItsGoroutineLeavesTheKeyRetryable, on every engine:
// a handler whose goroutine ends in runtime.Goexit has its claim released
// (the owner-fenced release a panic gets), so the next request with the
// key runs at once, never 409 idempotency_in_flight for the retention
// (RED_TEAM 428).
func TestHandlerThatEndsItsGoroutineLeavesTheKeyRetryable(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		// No wait: a retry meeting a claim still held is answered 409 at once.
		g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: v.s,
			Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clock.NewManual(v.now).Now}},
			Wait: -1, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		w := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			if runs.Add(1) == 1 {
				runtime.Goexit()
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"ok":true}`}, nil
		})
		key := newKey()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = w(ctxT(t), guardEvent(key, `{"a":1}`))
		}()
		<-done
		if r := call(t, w, guardEvent(key, `{"a":1}`)); r.StatusCode != 201 || runs.Load() != 2 {
			t.Fatalf("retry: %d %s, handler ran %d times; want a second run answering 201", r.StatusCode, r.Body, runs.Load())
		}
		if r := call(t, w, guardEvent(key, `{"a":1}`)); r.StatusCode != 201 || runs.Load() != 2 {
			t.Fatalf("second retry: %d %s, handler ran %d times; want the replay", r.StatusCode, r.Body, runs.Load())
		}
	})
}
