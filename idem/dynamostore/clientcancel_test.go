package dynamostore_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestClientHangUpIsNotAStoreOutage: on every engine, a client that hangs
// up while the Guard claims its key (the request's context cancelled in
// the middle of the claim's DynamoDB call, before it was sent or after it
// landed) is not told the store is unavailable: the Guard answers 499
// idemkit.client_closed_request (no Retry-After; nobody reads it), counts
// idemkit.idempotency.client_cancelled_total and logs the cancellation at
// info, never an error. The same when the client hangs up while the
// handler runs and the handler fails for it. The record is left so that a
// retry with the same key runs the handler at once: released, or never
// written.
func TestClientHangUpIsNotAStoreOutage(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		h := &dynamotest.HangUp{}
		s := newStore(t, e.Client(dynamotest.FastRetries, h.Middleware()), v.table)
		for _, c := range []struct {
			name    string
			landed  bool
			handler bool // the hang-up comes while the handler runs
		}{
			{"ClaimNotSent", false, false},
			{"ClaimLanded", true, false},
			{"WhileHandlerRuns", false, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				var logs testutil.SyncBuffer
				m := &testutil.Counts{}
				g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, Wait: -1, Metrics: m,
					Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(ctxT(t))
				defer cancel()
				ran := 0
				handler := func(hctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					ran++
					if c.handler && ran == 1 {
						cancel() // the client hangs up; the handler's own call fails
						return events.APIGatewayV2HTTPResponse{}, hctx.Err()
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"ok":true}`}, nil
				}
				if !c.handler {
					h.Arm("PutItem", cancel, c.landed)
				}
				ev := guardEvent(newKey(), `{"a":1}`)
				r, err := g.HTTPAPI(handler)(ctx, ev)
				if err != nil {
					t.Fatal(err)
				}
				var env struct{ Error string }
				_ = json.Unmarshal([]byte(r.Body), &env)
				if r.StatusCode != idem.StatusClientClosed || env.Error != idem.CodeClientClosed || r.Headers["Retry-After"] != "" {
					t.Fatalf("the hung-up request: %d %v %s; want %d %s", r.StatusCode, r.Headers, r.Body, idem.StatusClientClosed, idem.CodeClientClosed)
				}
				if n := m.Get(idem.MetricClientCancelled); n != 1 {
					t.Fatalf("%s counted %v times", idem.MetricClientCancelled, n)
				}
				out := logs.String()
				if !strings.Contains(out, `"msg":"idempotency: client cancelled"`) || strings.Contains(out, `"level":"ERROR"`) {
					t.Fatalf("logs:\n%s", out)
				}
				if want := map[bool]int{false: 0, true: 1}[c.handler]; ran != want {
					t.Fatalf("the handler ran %d times, want %d", ran, want)
				}
				// The retry, at once, with the same key: runs the handler.
				r, err = g.HTTPAPI(handler)(ctxT(t), ev)
				if err != nil || r.StatusCode != 201 || replayed(r.Headers) {
					t.Fatalf("the retry: %d %v %s (%v)", r.StatusCode, r.Headers, r.Body, err)
				}
				r, _ = g.HTTPAPI(handler)(ctxT(t), ev)
				if r.StatusCode != 201 || !replayed(r.Headers) {
					t.Fatalf("the replay: %d %v %s", r.StatusCode, r.Headers, r.Body)
				}
			})
		}
		// A duplicate whose client hangs up while it waits for the first
		// request's answer: 499 too, counted and logged; the first request
		// is untouched and its answer is the replay.
		t.Run("WhileWaiting", func(t *testing.T) {
			var logs testutil.SyncBuffer
			m := &testutil.Counts{}
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			guard := func(wait time.Duration, sleep func(context.Context, time.Duration) error) *idem.Guard {
				g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, Wait: wait, Metrics: m,
					Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{SleepFunc: sleep}},
					Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			first := guard(-1, nil)
			waiter := guard(10*time.Second, func(sctx context.Context, _ time.Duration) error {
				cancel() // the duplicate's client hangs up mid-wait
				return sctx.Err()
			})
			started, finish := make(chan struct{}), make(chan struct{})
			handler := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				close(started)
				<-finish
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"ok":true}`}, nil
			}
			ev := guardEvent(newKey(), `{"a":1}`)
			done := make(chan events.APIGatewayV2HTTPResponse)
			go func() {
				r, _ := first.HTTPAPI(handler)(ctxT(t), ev)
				done <- r
			}()
			<-started
			r, err := waiter.HTTPAPI(handler)(ctx, ev)
			if err != nil || r.StatusCode != idem.StatusClientClosed || !strings.Contains(r.Body, idem.CodeClientClosed) {
				t.Fatalf("the waiting duplicate: %d %s (%v)", r.StatusCode, r.Body, err)
			}
			close(finish)
			if r := <-done; r.StatusCode != 201 {
				t.Fatalf("the first request: %d %s", r.StatusCode, r.Body)
			}
			if r, _ := first.HTTPAPI(handler)(ctxT(t), ev); r.StatusCode != 201 || !replayed(r.Headers) {
				t.Fatalf("the replay: %d %v", r.StatusCode, r.Headers)
			}
			if n := m.Get(idem.MetricClientCancelled); n != 1 || !strings.Contains(logs.String(), `"stage":"wait"`) || strings.Contains(logs.String(), `"level":"ERROR"`) {
				t.Fatalf("counted %v; logs:\n%s", n, logs.String())
			}
		})
	})
}

// replayed reports whether headers mark a replay (the OpenWOP replay
// header, any letter case).
func replayed(headers map[string]string) bool {
	for k, v := range headers {
		if strings.EqualFold(k, "OpenWOP-Idempotent-Replay") && v == "true" {
			return true
		}
	}
	return false
}
