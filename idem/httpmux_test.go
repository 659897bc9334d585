package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/memstore"
)

func muxGuard(t *testing.T) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// post sends a JSON POST with the Idempotency-Key key (none when empty).
var post = routertest.Post

// TestMiddlewareAroundServeMuxResolvesThePattern: guard.Middleware(mux)
// takes each request's operation from the pattern the mux routes it to,
// with that pattern's path values in the fingerprint: a retry replays, the
// same key on another order of the same pattern is a mismatch, the same key
// on another pattern is its own request, and requests the mux answers
// itself (404, 405) pass straight through.
func TestMiddlewareAroundServeMuxResolvesThePattern(t *testing.T) {
	var runs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"order":"` + r.PathValue("id") + `","payment":` + itoa(int(n)) + `}`))
	})
	mux.HandleFunc("POST /refunds", func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(202)
	})
	h := muxGuard(t).Middleware(mux)

	first := post(h, "/orders/7/pay", testKey, `{"amount":5}`)
	if first.Code != 201 || first.Body.String() != `{"order":"7","payment":1}` {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	retry := post(h, "/orders/7/pay", testKey, `{"amount":5}`)
	if retry.Code != 201 || retry.Body.String() != first.Body.String() || retry.Header().Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("retry: %d %v %s", retry.Code, retry.Header(), retry.Body)
	}
	if other := post(h, "/orders/8/pay", testKey, `{"amount":5}`); other.Code != 409 {
		t.Fatalf("same key, other order: %d %s", other.Code, other.Body)
	}
	if refund := post(h, "/refunds", testKey, `{"amount":5}`); refund.Code != 202 {
		t.Fatalf("same key, other operation: %d %s", refund.Code, refund.Body)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handlers ran %d times, want 2", n)
	}
	if w := post(h, "/nowhere", testKey, `{}`); w.Code != 404 {
		t.Fatalf("unrouted: %d %s", w.Code, w.Body)
	}
	req := httptest.NewRequest("PUT", "/refunds", nil)
	req.Header.Set("Idempotency-Key", testKey)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 405 {
		t.Fatalf("wrong method: %d %s", w.Code, w.Body)
	}
}

// TestMiddlewareWithoutOperationFailsAtWrap: a wiring that can never yield
// an operation fails when the handler is wrapped, with a message that says
// what to configure: Handle with an empty operation id, or nothing to wrap.
func TestMiddlewareWithoutOperationFailsAtWrap(t *testing.T) {
	g := muxGuard(t)
	for name, wrap := range map[string]func(){
		"Handle without operation": func() { g.Handle("", http.NotFoundHandler()) },
		"Middleware(nil)":          func() { g.Middleware(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				p := recover()
				msg, _ := p.(string)
				if !strings.Contains(msg, "idem:") || !(strings.Contains(msg, "operation") || strings.Contains(msg, "handler")) {
					t.Fatalf("panic %v; want a wiring error naming what to configure", p)
				}
			}()
			wrap()
		})
	}
}

// TestWiringMistakeIsAServerConfigurationError: a handler wrapped by
// Middleware but reached without any pattern (not registered on a
// ServeMux, no HTTPOperation) cannot be guarded: the keyed request is
// answered 500 idemkit.server_configuration_error, whose message does not
// invite the caller to retry, and the handler does not run.
func TestWiringMistakeIsAServerConfigurationError(t *testing.T) {
	ran := false
	h := muxGuard(t).Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }))
	w := post(h, "/orders", testKey, `{}`)
	code, _ := envelope(t, w.Body.String())
	if w.Code != 500 || code != idem.CodeServerConfiguration || ran {
		t.Fatalf("%d %s (handler ran: %v)", w.Code, w.Body, ran)
	}
	if strings.Contains(strings.ToLower(w.Body.String()), "retry it") {
		t.Fatalf("a configuration error invites a retry: %s", w.Body)
	}

	// An HTTP API event without a routeKey (and no WithOperation): the same.
	e := newEnv(t, nil)
	hh := &handler{}
	r := e.call(hh, v2event("POST", "", testKey, `{}`))
	if code, _ := envelope(t, r.Body); r.StatusCode != 500 || code != idem.CodeServerConfiguration || hh.Calls() != 0 {
		t.Fatalf("HTTP API without a route key: %d %s (handler ran %d times)", r.StatusCode, r.Body, hh.Calls())
	}
}

// TestRoutedTakesTheRoutersOperationAndParams: Guard.Routed serves a
// router that says which route serves a request: the operation is the
// router's pattern (Config.Routes keys it: a skipped route runs every
// time), the pattern's path parameters are in the fingerprint (the same
// key on another order is a mismatch, on the same order a replay), and a
// request no route serves passes straight through to the router's own
// answer, unguarded.
func TestRoutedTakesTheRoutersOperationAndParams(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("t"), Logger: discardLogger(),
		Routes: map[string]idem.Route{"POST /audit/:id": {Skip: true}}})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	route := func(r *http.Request) (string, map[string]string, bool) {
		for _, prefix := range []string{"/orders/", "/audit/"} {
			if id, ok := strings.CutPrefix(r.URL.Path, prefix); ok {
				return r.Method + " " + prefix + ":id", map[string]string{"id": id}, true
			}
		}
		return "", nil, false
	}
	h := g.Routed(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := route(r); !ok {
			http.NotFound(w, r)
			return
		}
		runs++
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"run":` + strconv.Itoa(runs) + `}`))
	}))
	do := func(path, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"a":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const key = "routed-key-000000000000000000001"
	if r := do("/orders/1", key); r.Code != 201 {
		t.Fatalf("first: %d %s", r.Code, r.Body)
	}
	if r := do("/orders/1", key); r.Code != 201 || r.Body.String() != `{"run":1}` || runs != 1 {
		t.Fatalf("same order, same key: %d %v runs %d", r.Code, r.Header(), runs)
	}
	if r := do("/orders/2", key); r.Code != 409 || !strings.Contains(r.Body.String(), "idempotency_key_mismatch") || runs != 1 {
		t.Fatalf("another order, same key: %d %s runs %d", r.Code, r.Body, runs)
	}
	if r := do("/other", key+"2"); r.Code != 404 || runs != 1 {
		t.Fatalf("no route: %d %s", r.Code, r.Body)
	}
	do("/audit/1", key+"3")
	if r := do("/audit/1", key+"3"); r.Code != 201 || runs != 3 {
		t.Fatalf("the skipped route by its router pattern: %d runs %d, want it run twice", r.Code, runs)
	}
}

// TestAbortHandlerAbortsTheResponse: a handler that panics with
// http.ErrAbortHandler (net/http's way to abort a response) has its
// response aborted by the middleware too, never answered 500: the record
// is released, and a retry of the key runs the handler again.
func TestAbortHandlerAbortsTheResponse(t *testing.T) {
	var runs atomic.Int32
	h := muxGuard(t).Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
	}))
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Fatalf("the middleware's own panic: %v, want http.ErrAbortHandler", p)
			}
		}()
		w := post(h, "/orders", testKey, `{"a":1}`)
		t.Fatalf("aborted handler answered %d %s", w.Code, w.Body)
	}()
	if w := post(h, "/orders", testKey, `{"a":1}`); w.Code != http.StatusCreated || runs.Load() != 2 {
		t.Fatalf("retry after the abort: %d %s, %d runs; want 201 from a second run", w.Code, w.Body, runs.Load())
	}
}

// A handler that sends an informational response first (103 Early
// Hints) and then fails (500) is answered 500 and not recorded: the
// interim status is not the response. A retry of the key runs the handler
// again, as after any 5xx; a final status after a 1xx is what is replayed.
func TestInformationalStatusIsNotTheResponse(t *testing.T) {
	var runs atomic.Int32
	h := muxGuard(t).Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		if runs.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":"internal"}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"o-1"}`))
	}))
	if w := post(h, "/orders", testKey, `{"a":1}`); w.Code != http.StatusInternalServerError {
		t.Fatalf("a failure after 103: answered %d %s; want 500", w.Code, w.Body)
	}
	if w := post(h, "/orders", testKey, `{"a":1}`); w.Code != http.StatusCreated || runs.Load() != 2 {
		t.Fatalf("retry after the failure: %d %s, %d runs; want 201 from a second run", w.Code, w.Body, runs.Load())
	}
	if w := post(h, "/orders", testKey, `{"a":1}`); w.Code != http.StatusCreated || w.Body.String() != `{"id":"o-1"}` || runs.Load() != 2 {
		t.Fatalf("replay: %d %s, %d runs; want the 201 replayed", w.Code, w.Body, runs.Load())
	}
}
