package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

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
			f := newSlowFirst(t, p, "/orders/42/refund?amount=5")
			start, clk, key, url := f.start, f.clk, f.key, f.url

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
			if resp.StatusCode != 201 || string(b) != f.first || !res.Replayed || f.runs != 1 {
				t.Fatalf("duplicate got %d %s (first %s), replayed %v, runs %d, attempts %d", resp.StatusCode, b, f.first, res.Replayed, f.runs, res.Attempts)
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
			f := newSlowFirst(t, commerce.Policy, "/orders/42/refund")
			clk, key, url := f.clk, f.key, f.url

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
			f.free()
			<-f.firstDone
			if resp.StatusCode != 201 || string(b) != f.first || !res.Replayed || f.runs != 1 {
				t.Fatalf("duplicate got %d %s (first %s), replayed %v, runs %d, attempts %d", resp.StatusCode, b, f.first, res.Replayed, f.runs, res.Attempts)
			}
			if len(ra.seen) < 4 {
				t.Fatalf("only %d pending answers: the test did not poll through the 8 s", len(ra.seen))
			}
		})
	}
}
