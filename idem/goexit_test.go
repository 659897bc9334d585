package idem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
)

// A handler whose goroutine ends in runtime.Goexit (testing's FailNow
// called from a handler, a library that ends its goroutine so) never
// returns to the Guard. Its record was left claimed, its heartbeat renewing
// the lease for as long as the process lived, up to the record's retention
// (forever under the commerce policy): every retry of the key was 409
// idempotency_in_flight. It is released as for a handler that panicked, and
// its heartbeat stopped, so the next request with the key runs (RED_TEAM 428).
func TestHandlerThatEndsItsGoroutineLeavesTheKeyRetryable(t *testing.T) {
	id := scopeID(testTenant, "POST /runs", testKey)
	// inGoroutine runs f on a goroutine of its own and waits for it to end,
	// however it ends.
	inGoroutine := func(f func()) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			f()
		}()
		<-done
	}
	released := func(t *testing.T, e *env) {
		t.Helper()
		rec, ok, _ := e.store.Get(context.Background(), id, e.clock.Now())
		if !ok || rec.State != idem.StateRetryableFailure || rec.Response != nil {
			t.Fatalf("record after the handler's goroutine ended: %+v %v, want it released (%s)", rec, ok, idem.StateRetryableFailure)
		}
	}
	t.Run("net/http", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true } })
		calls := 0
		h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			if calls == 1 {
				runtime.Goexit()
			}
			w.WriteHeader(201)
		}))
		serve := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/runs", nil)
			req.Header.Set("Idempotency-Key", testKey)
			w := httptest.NewRecorder()
			inGoroutine(func() { h.ServeHTTP(w, req) })
			return w
		}
		serve()
		released(t, e)
		if logs := e.logs.String(); !strings.Contains(logs, "runtime.Goexit") || strings.Contains(logs, testKey) {
			t.Fatalf("logs %s: want the line saying the handler ended its goroutine, without the raw key", logs)
		}
		if w := serve(); w.Code != 201 || calls != 2 {
			t.Fatalf("retry: %d %s, handler ran %d times; want 201 from a second run", w.Code, w.Body, calls)
		}
	})
	t.Run("HTTPAPI", func(t *testing.T) {
		e := newEnv(t, nil)
		h := &handler{before: func(context.Context) {}}
		first := true
		h.before = func(context.Context) {
			if first {
				first = false
				runtime.Goexit()
			}
		}
		inGoroutine(func() { e.call(h, v2event("POST", "POST /runs", testKey, `{}`)) })
		released(t, e)
		var r events.APIGatewayV2HTTPResponse
		inGoroutine(func() { r = e.call(h, v2event("POST", "POST /runs", testKey, `{}`)) })
		if r.StatusCode != 201 || h.Calls() != 2 {
			t.Fatalf("retry: %d %s, handler ran %d times; want 201 from a second run", r.StatusCode, r.Body, h.Calls())
		}
	})
	t.Run("Once", func(t *testing.T) {
		e := newEnv(t, nil)
		calls := 0
		w := idem.Work{Operation: "charge-order", Key: testKey, Tenant: testTenant, Payload: []byte(`{}`),
			Run: func(context.Context) ([]byte, error) {
				calls++
				if calls == 1 {
					runtime.Goexit()
				}
				return []byte(`"done"`), nil
			}}
		inGoroutine(func() { _, _, _ = e.guard.Once(context.Background(), w) })
		var v []byte
		var ran bool
		var err error
		inGoroutine(func() { v, ran, err = e.guard.Once(context.Background(), w) })
		if err != nil || !ran || string(v) != `"done"` || calls != 2 {
			t.Fatalf("retry: %s ran=%v %v, work ran %d times; want a second run", v, ran, err, calls)
		}
	})
}
