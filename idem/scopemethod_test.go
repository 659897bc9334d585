package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestScopeHasTheMethodOnRoutesThatServeAny: a policy that scopes a key
// by its operation (Policy.Scope.Operation: "the method and route") scopes
// it by the request's method too where the route serves every method: an
// HTTP API "ANY /path" or "$default" route, a ServeMux pattern without a
// method. The ERP policy names the HTTP method a part of the key's scope
// apart from the route, and the REST adapter and the router adapters
// already put it in the operation. Before, one key sent with POST and then
// with PUT to such a route was one record: the PUT was 409
// IDEMPOTENCY_KEY_CONFLICT (idempotency_key_mismatch) instead of a first
// execution of its own. Each method's retry still replays its own answer.
func TestScopeHasTheMethodOnRoutesThatServeAny(t *testing.T) {
	const key = "ERP-WO-20260807-000001-abc" // both grammars
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, erp.Policy} {
		for _, route := range []string{"ANY /runs", "$default"} {
			t.Run(p.Name+"/HTTPAPI "+route, func(t *testing.T) {
				e := newEnv(t, func(c *idem.Config) { c.Policy = p })
				h := &handler{}
				for i, m := range []string{"POST", "PUT", "POST", "PUT", "PATCH"} {
					ev := v2event(m, route, key, `{"a":1}`)
					ev.RawPath = "/runs"
					r := e.call(h, ev)
					replay := i == 2 || i == 3
					if r.StatusCode != 201 || (r.Headers[idem.HeaderOpenWOPReplay] == "true" || r.Headers[erp.HeaderReplayed] == "true") != replay {
						t.Fatalf("%s (request %d): %d %v %s; want 201, replayed %v", m, i+1, r.StatusCode, r.Headers, r.Body, replay)
					}
				}
				if n := h.Calls(); n != 3 {
					t.Fatalf("handler ran %d times, want 3 (POST, PUT, PATCH once each)", n)
				}
			})
		}
		t.Run(p.Name+"/ServeMux pattern without a method", func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) { c.Policy = p; c.Tenant = idem.SingleTenant("t") })
			var runs atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/runs", func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(201)
				_, _ = io.WriteString(w, r.Method)
			})
			srv := e.guard.Middleware(mux)
			for i, m := range []string{"POST", "PUT", "POST", "PUT"} {
				req := httptest.NewRequest(m, "/runs", strings.NewReader(`{}`))
				req.Header.Set("Idempotency-Key", key)
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != 201 || w.Body.String() != m {
					t.Fatalf("%s (request %d): %d %q; want 201 and its own answer", m, i+1, w.Code, w.Body)
				}
			}
			if n := runs.Load(); n != 2 {
				t.Fatalf("handler ran %d times, want 2", n)
			}
		})
	}
}

// TestScopeOfANamedOperationIsUnchanged: where the operation names the
// method (a route key "POST /runs") or is the host's own operation id
// (Guard.Handle, Request.Operation), the same key with another method is
// still 409 idempotency_key_mismatch: the method is in the fingerprint.
func TestScopeOfANamedOperationIsUnchanged(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Tenant = idem.SingleTenant("t") })
	var runs atomic.Int32
	h := e.guard.Handle("createRun", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(201)
	}))
	for i, c := range []struct {
		method string
		want   int
	}{{"POST", 201}, {"PUT", 409}} {
		req := httptest.NewRequest(c.method, "/runs", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", testKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != c.want {
			t.Fatalf("request %d (%s): %d %q; want %d", i+1, c.method, w.Code, w.Body, c.want)
		}
	}
}
