package idem_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
)

// regexRouter is a router of its own with ServeMux's Handler method: it
// routes by regular expressions and names each route by a pattern in its
// own syntax, which Go's ServeMux cannot use to route the request
// ("POST /orders/{id:[0-9]+}" it rejects, "POST /items/:id" it parses
// as a literal path that the request does not match).
type regexRouter struct {
	routes []regexRoute
}

type regexRoute struct {
	pattern string
	method  string
	re      *regexp.Regexp
	h       http.Handler
}

func (rr *regexRouter) Handler(r *http.Request) (http.Handler, string) {
	for _, rt := range rr.routes {
		if rt.method == r.Method && rt.re.MatchString(r.URL.Path) {
			return rt.h, rt.pattern
		}
	}
	return http.NotFoundHandler(), ""
}

func (rr *regexRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, _ := rr.Handler(r)
	h.ServeHTTP(w, r)
}

// TestMiddlewareAroundARouterOfItsOwnSyntaxNeverFailsOpen:
// guard.Middleware around a router with ServeMux's Handler method whose
// patterns are not ServeMux patterns still guards the requests that router
// routes: the operation is the router's pattern and, as their path values
// cannot be read from it, the whole path is in the fingerprint. A retry
// replays, the handler runs once, and the same key on another order of the
// same route is a mismatch, never that order's replay or a second run
// passed straight through.
func TestMiddlewareAroundARouterOfItsOwnSyntaxNeverFailsOpen(t *testing.T) {
	for _, tc := range []struct{ name, pattern, re string }{
		{"pattern the ServeMux rejects", "POST /orders/{id:[0-9]+}", `^/orders/[0-9]+$`},
		{"pattern the ServeMux reads otherwise", "POST /orders/:id", `^/orders/[^/]+$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			rr := &regexRouter{routes: []regexRoute{{pattern: tc.pattern, method: "POST", re: regexp.MustCompile(tc.re),
				h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := runs.Add(1)
					w.WriteHeader(201)
					_, _ = w.Write([]byte(`{"order":"` + strings.TrimPrefix(r.URL.Path, "/orders/") + `","run":` + strconv.Itoa(int(n)) + `}`))
				})}}}
			h := muxGuard(t).Middleware(rr)

			first := post(h, "/orders/7", testKey, `{"amount":5}`)
			if first.Code != 201 || first.Body.String() != `{"order":"7","run":1}` {
				t.Fatalf("first: %d %s", first.Code, first.Body)
			}
			retry := post(h, "/orders/7", testKey, `{"amount":5}`)
			if retry.Code != 201 || retry.Body.String() != first.Body.String() || retry.Header().Get("OpenWOP-Idempotent-Replay") != "true" {
				t.Fatalf("retry: %d %v %s (runs %d)", retry.Code, retry.Header(), retry.Body, runs.Load())
			}
			other := post(h, "/orders/8", testKey, `{"amount":5}`)
			if other.Code != 409 || !strings.Contains(other.Body.String(), "idempotency_key_mismatch") {
				t.Fatalf("same key, other order: %d %s", other.Code, other.Body)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			if w := post(h, "/nowhere", testKey, `{}`); w.Code != 404 {
				t.Fatalf("unrouted: %d %s", w.Code, w.Body)
			}
			// Parallel duplicates of a new key: one run, every answer its.
			const n = 8
			bodies := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					w := post(h, "/orders/9", testKey+"p", `{"amount":5}`)
					bodies[i] = strconv.Itoa(w.Code) + " " + w.Body.String()
				})
			}
			wg.Wait()
			for _, b := range bodies {
				if b != `201 {"order":"9","run":2}` {
					t.Fatalf("parallel duplicates: %q", bodies)
				}
			}
		})
	}
}

// TestMiddlewareAroundServeMuxPassesItsRedirectsThrough: a request the
// wrapped ServeMux answers with a redirect to the canonical path (the
// pattern "/orders/" for "/orders", a path with "//") runs no handler and
// passes straight through, as before.
func TestMiddlewareAroundServeMuxPassesItsRedirectsThrough(t *testing.T) {
	ran := false
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/", func(w http.ResponseWriter, r *http.Request) { ran = true })
	h := muxGuard(t).Middleware(mux)
	for _, path := range []string{"/orders", "/orders//7"} {
		w := post(h, path, testKey, `{}`)
		if w.Code/100 != 3 || ran {
			t.Fatalf("%s: %d %s (handler ran: %v)", path, w.Code, w.Body, ran)
		}
	}
}

// TestRoutedWithoutAnOperationIsAServerConfigurationError: a route
// function that says a route serves the request (ok) but names no
// operation cannot be guarded: the keyed request is answered 500
// idemkit.server_configuration_error and the handler does not run, never
// passed straight through unguarded.
func TestRoutedWithoutAnOperationIsAServerConfigurationError(t *testing.T) {
	ran := false
	h := muxGuard(t).Routed(func(r *http.Request) (string, map[string]string, bool) { return "", nil, true },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true; w.WriteHeader(201) }))
	w := post(h, "/orders", testKey, `{}`)
	if code, _ := envelope(t, w.Body.String()); w.Code != 500 || code != idem.CodeServerConfiguration || ran {
		t.Fatalf("%d %s (handler ran: %v)", w.Code, w.Body, ran)
	}
	// Unkeyed, on a route that does not require a key: straight through.
	req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 201 || !ran {
		t.Fatalf("unkeyed: %d (ran %v)", rec.Code, ran)
	}
}

// TestTemplateWithoutItsValuesNeverSharesAnAnswer: a route the Guard is
// told of by its template but without the values the request gave it (a
// Guard.Routed hook that returns no parameters; Request.Operation behind
// the $default route without Params, in a router's syntax of its own,
// ":id" or "*path") has the raw path in the fingerprint in their place,
// as a "{name}" template without Params already had under Do: the same
// key on another order is 409 idempotency_key_mismatch, never the first
// order's answer replayed. A concrete operation, which names its
// resource, keeps its fingerprint.
func TestTemplateWithoutItsValuesNeverSharesAnAnswer(t *testing.T) {
	for _, pattern := range []string{"POST /orders/{id}", "POST /orders/:id", "POST /orders/*rest"} {
		t.Run("Routed "+pattern, func(t *testing.T) {
			var runs atomic.Int32
			h := muxGuard(t).Routed(func(r *http.Request) (string, map[string]string, bool) { return pattern, nil, true },
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					w.WriteHeader(201)
					_, _ = w.Write([]byte(`{"order":"` + strings.TrimPrefix(r.URL.Path, "/orders/") + `"}`))
				}))
			if w := post(h, "/orders/7", testKey, `{"amount":5}`); w.Code != 201 {
				t.Fatalf("first: %d %s", w.Code, w.Body)
			}
			if w := post(h, "/orders/7", testKey, `{"amount":5}`); w.Code != 201 || w.Header().Get("OpenWOP-Idempotent-Replay") != "true" {
				t.Fatalf("retry: %d %s", w.Code, w.Body)
			}
			other := post(h, "/orders/8", testKey, `{"amount":5}`)
			if other.Code != 409 || !strings.Contains(other.Body.String(), "idempotency_key_mismatch") || runs.Load() != 1 {
				t.Fatalf("same key, other order: %d %s (runs %d)", other.Code, other.Body, runs.Load())
			}
		})
	}
	for _, c := range []struct {
		op     string
		params map[string]string
	}{{"POST /orders/:id", nil}, {"POST /orders/*rest", nil}, {"POST /orders/{id}", map[string]string{}}} {
		op := c.op
		t.Run("Do "+op, func(t *testing.T) {
			e := newEnv(t, nil)
			h := &handler{}
			call := func(path string) events.APIGatewayV2HTTPResponse {
				ev := v2event("POST", "$default", testKey, `{"amount":5}`)
				ev.RawPath = path
				resp, _ := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: op, Params: c.params},
					func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) { return h.v2(ctx, ev) })
				return resp
			}
			if r := call("/orders/7"); r.StatusCode != 201 {
				t.Fatalf("first: %d %s", r.StatusCode, r.Body)
			}
			if r := call("/orders/8"); r.StatusCode != 409 || !strings.Contains(r.Body, "idempotency_key_mismatch") || h.Calls() != 1 {
				t.Fatalf("same key, other order: %d %s (calls %d)", r.StatusCode, r.Body, h.Calls())
			}
		})
	}
	t.Run("concrete operation", func(t *testing.T) {
		e := newEnv(t, nil)
		h := &handler{}
		for _, path := range []string{"/orders", "/orders/"} {
			ev := v2event("POST", "$default", testKey, `{"amount":5}`)
			ev.RawPath = path
			r, _ := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: "POST /orders"},
				func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) { return h.v2(ctx, ev) })
			if r.StatusCode != 201 || h.Calls() != 1 {
				t.Fatalf("%s: %d %s (calls %d): a concrete operation's path is not in its fingerprint", path, r.StatusCode, r.Body, h.Calls())
			}
		}
	})
}
