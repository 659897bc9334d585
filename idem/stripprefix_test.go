package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestTwoAppsUnderStrippedPrefixesNeverShareAnAnswer: one Guard serves
// two applications mounted under two prefixes with http.StripPrefix
// outside the middleware (as its doc places it), each with its own
// ServeMux and a route of one pattern, POST /orders. The path the client
// sent is in the fingerprint when a handler before the Guard rewrote it:
// the same key and body sent to /b/orders after /a/orders is 409
// idempotency_key_mismatch, b's handler not run, and the retry to
// /a/orders is a's replay. Before, both requests had one operation and
// one fingerprint (the stripped path, /orders), and b was answered a's
// recorded answer.
func TestTwoAppsUnderStrippedPrefixesNeverShareAnAnswer(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	runs := map[string]int{}
	root := http.NewServeMux()
	for _, app := range []string{"a", "b"} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
			runs[app]++
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"app":"` + app + `"}`))
		})
		root.Handle("/"+app+"/", http.StripPrefix("/"+app, e.guard.Middleware(mux)))
	}
	post := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, testKey)
		rec := httptest.NewRecorder()
		root.ServeHTTP(rec, req)
		return rec
	}
	for range 2 {
		if a := post("/a/orders"); a.Code != 201 || a.Body.String() != `{"app":"a"}` || runs["a"] != 1 {
			t.Fatalf("a: %d %s (runs %v), want a's answer, one run", a.Code, a.Body, runs)
		}
	}
	if b := post("/b/orders"); b.Code != http.StatusConflict || !strings.Contains(b.Body.String(), "idempotency_key_mismatch") || runs["b"] != 0 {
		t.Fatalf("b under a's key: %d %s (runs %v), want 409 idempotency_key_mismatch and b not run", b.Code, b.Body, runs)
	}
}
