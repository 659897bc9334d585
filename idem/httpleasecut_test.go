package idem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
)

// TestNetHTTPHandlerStoppedByLeaseLossIsReleased: a net/http handler
// that stops when its context ends (the idiom: it returns, writing
// nothing) after the Guard cut its lease (the renewals failed; nobody
// reclaimed the record) is answered as an API Gateway handler returning
// the context's cause is: 503 idemkit.store_unavailable with Retry-After,
// the record released, and the retry runs the handler. Before, it was
// recorded as an empty 200 (the client was still there, so it did not
// read as a hang-up), and every retry of the key was replayed that empty
// 200 though the handler had done nothing.
func TestNetHTTPHandlerStoppedByLeaseLossIsReleased(t *testing.T) {
	const lease, every = 30 * time.Second, 9 * time.Second
	ticks := make(chan time.Time)
	var s *failingRenewals
	e := newEnv(t, func(c *idem.Config) {
		c.Lease, c.Heartbeat = lease, every
		s = &failingRenewals{Store: c.Store, failFrom: 1}
		c.Store = s
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
		c.Test.Clock = idemtest.ClockFuncs{NowFunc: c.Test.Clock.Now,
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
	})
	s.took = func() { e.clock.Advance(every) }
	var runs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /runs", func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) > 1 {
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"run":"r-1"}`))
			return
		}
		ctx := r.Context()
		e.clock.Advance(every)
		if !tickUntilCut(ctx, ticks, 10) || !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
			t.Errorf("the handler's context was not cut with ErrLeaseLost: %v", context.Cause(ctx))
		}
		// Stops: returns without a word, as a net/http handler does.
	})
	h := e.guard.Middleware(mux)
	post := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, testKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	first := post()
	if first.Code != http.StatusServiceUnavailable || !strings.Contains(first.Body.String(), idem.CodeStoreUnavailable) || first.Header().Get("Retry-After") == "" {
		t.Fatalf("the handler stopped by the lease's loss answered %d %q %v, want 503 %s with Retry-After", first.Code, first.Body, first.Header(), idem.CodeStoreUnavailable)
	}
	if retry := post(); retry.Code != 201 || retry.Body.String() != `{"run":"r-1"}` || runs.Load() != 2 {
		t.Fatalf("retry: %d %q (runs %d), want the handler run again", retry.Code, retry.Body, runs.Load())
	}
}
