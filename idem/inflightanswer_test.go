package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// A handler that answers 409 idempotency_in_flight (a gateway forwarding
// the caller's key to an OpenWOP service still processing it, and
// passing its answer on) says "not yet, retry after Retry-After": the
// registry's retriable false means not retryable without waiting. Every
// preset policy kept it as a final 4xx, so each retry of the key, however
// long it waited, was replayed that 409, and the request never reached
// the service again (RED_TEAM 431). It is released as a 5xx is, under
// the ERP policy in its own spelling too (IDEMPOTENCY_REQUEST_IN_PROGRESS).
func TestHandlersOwnInFlightAnswerIsNeverReplayed(t *testing.T) {
	for _, c := range []struct {
		policy idem.Policy
		code   string
	}{
		{idem.PolicyOpenWOP, "idempotency_in_flight"},
		{commerce.Policy, "idempotency_in_flight"},
		{erp.Policy, "idempotency_in_flight"},
		{erp.Policy, erp.CodeRequestInProgress},
	} {
		t.Run(c.policy.Name+"/"+c.code, func(t *testing.T) {
			if d := c.policy.Cache(409, c.code); d != idem.Retry {
				t.Errorf("Cache(409 %s) = %v, want Retry", c.code, d)
			}
			e := newEnv(t, func(cfg *idem.Config) {
				cfg.Policy = c.policy
				cfg.Tenant = idem.SingleTenant(testTenant)
				cfg.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
				cfg.HTTPCredential = func(_ *http.Request, name string) string { return name + "-a" }
			})
			calls := 0
			h := e.guard.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				if calls == 1 {
					// The upstream service's answer, passed on.
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(409)
					_, _ = w.Write([]byte(`{"error":"` + c.code + `","message":"A request with this key is still being processed."}`))
					return
				}
				w.WriteHeader(201)
				_, _ = w.Write([]byte(`{"id":"o-1"}`))
			}))
			checkFirstAnswerNotKept(t, h, "/orders", 409, &calls)
		})
	}
}
