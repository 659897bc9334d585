package idem_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// TestWaitingDuplicateOfUncachedOutcomeIsInFlight: of two concurrent
// same-key requests under the OpenWOP default, the one that waits gets the
// winner's response only when it is final (one the record caches);
// otherwise — the winner answered 429 or 5xx (released for a retry), was
// rejected at the door (401, 403: forgotten) or failed without a response —
// it is answered 409 idempotency_in_flight with Retry-After and no retry
// timing in details, and never runs the handler itself: the two are never
// both processed. The caller's retry after that answer runs afresh.
func TestWaitingDuplicateOfUncachedOutcomeIsInFlight(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		err    error
	}{
		{"500", 500, nil}, {"503", 503, nil}, {"429", 429, nil},
		{"401", 401, nil}, {"403", 403, nil}, {"handler error", 0, errors.New("boom")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) { cfg.Wait = time.Minute })
			block := make(chan struct{})
			h := &handler{block: block, status: c.status, err: c.err}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = e.guard.HTTPAPI(h.v2)(t.Context(), v2event("POST", "POST /runs", testKey, `{"a":1}`))
			}()
			for h.Calls() == 0 {
				time.Sleep(time.Millisecond)
			}
			waiter := make(chan struct{})
			var got idemResp
			go func() {
				defer close(waiter)
				r, _ := e.guard.HTTPAPI(h.v2)(t.Context(), v2event("POST", "POST /runs", testKey, `{"a":1}`))
				got = idemResp{r.StatusCode, r.Headers, r.Body}
			}()
			for e.store.Calls()["Claim"] < 2 { // the duplicate found the claim and waits
				time.Sleep(time.Millisecond)
			}
			close(block)
			<-done
			<-waiter
			if h.Calls() != 1 {
				t.Fatalf("handler ran %d times for two concurrent requests; want 1 (the waiter got %d %s)", h.Calls(), got.status, got.body)
			}
			var env struct {
				Error   string         `json:"error"`
				Details map[string]any `json:"details"`
			}
			_ = json.Unmarshal([]byte(got.body), &env)
			if got.status != 409 || env.Error != "idempotency_in_flight" || got.headers["Retry-After"] != "1" || len(env.Details) != 0 {
				t.Fatalf("waiter got %d %v %s; want 409 idempotency_in_flight with Retry-After: 1 (the poll interval), no details", got.status, got.headers, got.body)
			}
			// The caller's retry runs afresh.
			h.status, h.err, h.block = 201, nil, nil
			if r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`)); r.StatusCode != 201 || h.Calls() != 2 {
				t.Fatalf("retry after the in-flight answer: %d, handler ran %d times; want 201, 2", r.StatusCode, h.Calls())
			}
		})
	}
}

type idemResp struct {
	status  int
	headers map[string]string
	body    string
}
