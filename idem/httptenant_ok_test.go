package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestHTTPTenantNotOKIsNoTenant: a Config.HTTPTenant that answers ok
// false has named no tenant, whatever string it returns with it (the
// claim of a token whose signature failed, as a JWT library parses it):
// the keyed request is 401 unauthenticated in the envelope, its handler
// not run, and never the replay of that tenant's record. Before, the
// string was taken as the tenant: a request with a forged token naming
// tenant-a, sent with tenant-a's key and body, was answered tenant-a's
// recorded answer.
func TestHTTPTenantNotOKIsNoTenant(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(r *http.Request) (string, bool) {
			// The tenant claim is read before the signature is checked.
			return "tenant-a", r.Header.Get("X-Signature") == "valid"
		}
	})
	var runs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"order":"o-1","card":"4242"}`))
	})
	h := e.guard.Middleware(mux)
	post := func(sig string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, testKey)
		req.Header.Set("X-Signature", sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if first := post("valid"); first.Code != 201 || runs.Load() != 1 {
		t.Fatalf("tenant-a's own request: %d %s, runs %d", first.Code, first.Body, runs.Load())
	}
	forged := post("forged")
	if forged.Code != http.StatusUnauthorized || !strings.Contains(forged.Body.String(), `"error":"unauthenticated"`) {
		t.Fatalf("a request whose HTTPTenant said ok false: %d %s %v, want 401 unauthenticated", forged.Code, forged.Body, forged.Header())
	}
	if strings.Contains(forged.Body.String(), "4242") || runs.Load() != 1 {
		t.Fatalf("a request with no tenant got tenant-a's answer or ran the handler (runs %d): %s", runs.Load(), forged.Body)
	}
}
