package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestHTTPOperationLeavesTheMuxsOwnAnswersUnguarded: with
// Config.HTTPOperation naming the operation, a ServeMux wrapped by
// Middleware still answers the requests no pattern of it serves (its 405,
// 404 or redirect) straight through, as without the hook: the 405 for a
// POST the mux serves only as GET is not recorded, and once a POST route
// exists the retry of the key runs it. Before, the 405 was recorded under the hook's operation and
// replayed to the retry after the route was added.
// The routes it serves are guarded under the hook's operation, as before.
func TestHTTPOperationLeavesTheMuxsOwnAnswersUnguarded(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
		c.HTTPOperation = func(r *http.Request) string { return r.Method + " " + r.URL.Path }
	})
	var runs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(200) })
	h := e.guard.Middleware(mux)
	post := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, testKey)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if first := post("/orders"); first.Code != http.StatusMethodNotAllowed || first.Header().Get(idem.HeaderOpenWOPReplay) != "" {
		t.Fatalf("POST to a GET route: %d %v", first.Code, first.Header())
	}
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) { runs.Add(1); w.WriteHeader(201) })
	if retry := post("/orders"); retry.Code != 201 || retry.Header().Get(idem.HeaderOpenWOPReplay) != "" || runs.Load() != 1 {
		t.Fatalf("retry once the route exists: %d %v (runs %d), want the route run", retry.Code, retry.Header(), runs.Load())
	}
	if again := post("/orders"); again.Code != 201 || again.Header().Get(idem.HeaderOpenWOPReplay) != "true" || runs.Load() != 1 {
		t.Fatalf("the served route is guarded: %d %v (runs %d)", again.Code, again.Header(), runs.Load())
	}
}
