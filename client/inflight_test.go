package client

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// stepClock is a fake clock that the client's Sleep advances; crossing at
// it calls fire once (outside the lock).
type stepClock struct {
	mu    sync.Mutex
	t     time.Time
	at    time.Time
	fired bool
	fire  func()
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	fire := !c.fired && !c.t.Before(c.at)
	c.fired = c.fired || fire
	c.mu.Unlock()
	if fire {
		c.fire()
	}
	return ctx.Err()
}

// retryAfters records the Retry-After of every in-flight 409 and pending
// 202 it passes on.
type retryAfters struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (r *retryAfters) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && (resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusAccepted) {
		r.mu.Lock()
		r.seen = append(r.seen, resp.Header.Get("Retry-After"))
		r.mu.Unlock()
	}
	return resp, err
}

// The first request answers 8 s after a duplicate arrives (the server does
// not wait: every duplicate gets 409 idempotency_in_flight at once). With
// the default budget, the client's duplicate keeps polling at the short
// Retry-After a live owner gets and receives the first request's answer as
// a replay; the request ran once. Time is the injected clock: no real
// 8-second wait.
func TestSlowFirstRequestAnswersWithinDefaultBudget(t *testing.T) {
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, erp.Policy} {
		t.Run(p.Name, func(t *testing.T) {
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			release, started, firstDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			clk := &stepClock{t: start, at: start.Add(8 * time.Second)}
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			clk.fire = func() { free(); <-firstDone }
			g, err := idem.New(idem.Config{
				Store: memstore.New(), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}}, Wait: -1, Policy: p,
				Tenant: idem.SingleTenant("shop"), Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			var runs int
			mux := http.NewServeMux()
			mux.Handle("POST /orders/{id}/refund", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				close(started)
				<-release
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				_, _ = io.WriteString(w, `{"refund":"rf_1"}`)
			})))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			defer free() // before srv.Close: a failing test must not leave the first request blocked
			key := NewKey()
			url := srv.URL + "/orders/42/refund?amount=5"

			var first string
			go func() {
				defer close(firstDone)
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"reason":"late"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				first = string(b)
			}()
			<-started

			ra := &retryAfters{base: http.DefaultTransport}
			c := &http.Client{Transport: &Transport{Config: Config{Base: ra, Now: clk.Now, Sleep: clk.Sleep}}}
			req, _ := http.NewRequestWithContext(WithKey(context.Background(), key), http.MethodPost, url, strings.NewReader(`{"reason":"late"}`))
			req.Header.Set("Content-Type", "application/json")
			var res Result
			resp, err := c.Do(req.WithContext(WithResult(req.Context(), &res)))
			if err != nil {
				t.Fatalf("duplicate: %v (result %+v)", err, res)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 201 || string(b) != first || !res.Replayed || runs != 1 {
				t.Fatalf("duplicate got %d %s (first %s), replayed %v, runs %d, attempts %d", resp.StatusCode, b, first, res.Replayed, runs, res.Attempts)
			}
			if len(ra.seen) < 4 {
				t.Fatalf("only %d in-flight answers: the test did not poll through the 8 s", len(ra.seen))
			}
			for _, v := range ra.seen {
				if d, ok := RetryAfter(v, start); !ok || d > 2*time.Second {
					t.Fatalf("Retry-After %q under a live owner, want <= 2 s (all: %v)", v, ra.seen)
				}
			}
			if elapsed := clk.Now().Sub(start); elapsed < 8*time.Second || elapsed > DefaultMaxElapsed {
				t.Fatalf("answered after %s of injected time", elapsed)
			}
		})
	}
}

// Under the commerce policy a duplicate of a request still executing is
// never 409 idempotency_in_flight: it is the pending answer, 202 with
// Retry-After and Idempotent-Replayed: true, {"status":"pending",
// "requestId":…}, which names no action. It is the commerce policy's
// in-flight answer, so the client polls it as it polls the 409: the first
// request answers after 8 s and the client's duplicate receives that
// answer as a replay; the request ran once. A caller that asks for the
// pending action at once (Idempotency-Mode: async) gets the 202 itself.
func TestCommercePendingAnswerIsPolled(t *testing.T) {
	for _, mode := range []string{"", "sync", "async"} {
		t.Run("mode="+mode, func(t *testing.T) {
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			release, started, firstDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
			clk := &stepClock{t: start, at: start.Add(8 * time.Second)}
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			clk.fire = func() { free(); <-firstDone }
			g, err := idem.New(idem.Config{
				Store: memstore.New(), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}}, Wait: -1, Policy: commerce.Policy,
				Tenant: idem.SingleTenant("shop"), Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			var runs int
			mux := http.NewServeMux()
			mux.Handle("POST /orders/{id}/refund", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				close(started)
				<-release
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				_, _ = io.WriteString(w, `{"refund":"rf_1"}`)
			})))
			srv := httptest.NewServer(mux)
			defer srv.Close()
			defer free()
			key := NewKey()
			url := srv.URL + "/orders/42/refund"

			var first string
			go func() {
				defer close(firstDone)
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"reason":"late"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				first = string(b)
			}()
			<-started

			ra := &retryAfters{base: http.DefaultTransport}
			c := &http.Client{Transport: &Transport{Config: Config{Base: ra, Now: clk.Now, Sleep: clk.Sleep}}}
			var res Result
			req, _ := http.NewRequestWithContext(WithResult(WithKey(context.Background(), key), &res), http.MethodPost, url, strings.NewReader(`{"reason":"late"}`))
			req.Header.Set("Content-Type", "application/json")
			if mode != "" {
				req.Header.Set("Idempotency-Mode", mode)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("duplicate: %v (result %+v)", err, res)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if mode == "async" {
				if resp.StatusCode != 202 || !res.Replayed || res.Attempts != 1 || resp.Header.Get("Retry-After") == "" {
					t.Fatalf("async duplicate got %d %s, result %+v: want the pending action at once", resp.StatusCode, b, res)
				}
				return
			}
			free()
			<-firstDone
			if resp.StatusCode != 201 || string(b) != first || !res.Replayed || runs != 1 {
				t.Fatalf("duplicate got %d %s (first %s), replayed %v, runs %d, attempts %d", resp.StatusCode, b, first, res.Replayed, runs, res.Attempts)
			}
			if len(ra.seen) < 4 {
				t.Fatalf("only %d pending answers: the test did not poll through the 8 s", len(ra.seen))
			}
		})
	}
}
