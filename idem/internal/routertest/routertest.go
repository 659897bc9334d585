// Package routertest is what the router adapters' tests share
// (idem/router/idemchi, idemmux, idemgin, idemecho: each a module of its
// own, which reaches this package through its replace of the root
// module): a Guard, a POST, and the scenarios every adapter passes under
// its router.
package routertest

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// Guard returns a Guard for the tenant "shop" on a memory store, its log
// discarded, with routes as Config.Routes.
func Guard(t testing.TB, routes map[string]idem.Route) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"), Routes: routes,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Post sends a JSON POST of body to path through h, with key as its
// Idempotency-Key (none when key is empty), and returns the answer.
func Post(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(idem.HeaderKey, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Routes is the routing of GuardsEachRoute, built by the adapter's test
// under its middleware: POST /orders/{id}, and under /shops/{shop} POST
// /orders/{id} and POST /audit/{id}, each handler counting its runs in
// Runs and answering 201 with the order (the path parameter) and the run.
// The Guard skips the audit route by its full route in the router's
// syntax (Config.Routes).
type Routes struct {
	// Handler is the router under the adapter's middleware.
	Handler http.Handler
	// Key is the prefix of the scenario's keys.
	Key string
	// Runs counts the handlers' runs.
	Runs *atomic.Int32
	// Bases are the order routes checked, each followed by the order id.
	// Default "/orders/" and "/shops/s1/orders/".
	Bases []string
	// Replayed, if set, checks more after a base's first run and its
	// replay.
	Replayed func(t *testing.T, base string, first *httptest.ResponseRecorder)
}

// GuardsEachRoute checks that the middleware guards every route of r by
// its route: the same key and body on the same order is a replay and the
// handler runs once, on another order (or another shop) a 409 mismatch; a
// path no route serves is the router's 404; the route Config.Routes
// skips by its full route runs every time.
func GuardsEachRoute(t *testing.T, r Routes) {
	t.Helper()
	bases := r.Bases
	if bases == nil {
		bases = []string{"/orders/", "/shops/s1/orders/"}
	}
	for _, base := range bases {
		r.Runs.Store(0)
		k := r.Key + strings.ReplaceAll(base, "/", "-")
		first, again := Post(r.Handler, base+"1", k, `{"qty":1}`), Post(r.Handler, base+"1", k, `{"qty":1}`)
		if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() || r.Runs.Load() != 1 {
			t.Fatalf("%s: %d %s then %d %s, runs %d; want one run and its replay", base, first.Code, first.Body, again.Code, again.Body, r.Runs.Load())
		}
		if r.Replayed != nil {
			r.Replayed(t, base, first)
		}
		if other := Post(r.Handler, base+"2", k, `{"qty":1}`); other.Code != 409 || !strings.Contains(other.Body.String(), "idempotency_key_mismatch") || r.Runs.Load() != 1 {
			t.Fatalf("%s: another order under the same key: %d %s", base, other.Code, other.Body)
		}
	}
	if other := Post(r.Handler, "/shops/s2/orders/1", r.Key+"-shops-s1-orders-", `{"qty":1}`); other.Code != 409 {
		t.Fatalf("another shop (the group's parameter) under the same key: %d %s", other.Code, other.Body)
	}
	if nf := Post(r.Handler, "/nowhere", r.Key+"nf", `{}`); nf.Code != 404 {
		t.Fatalf("no route: %d %s", nf.Code, nf.Body)
	}
	r.Runs.Store(0)
	Post(r.Handler, "/shops/s1/audit/1", r.Key+"audit", `{}`)
	Post(r.Handler, "/shops/s1/audit/1", r.Key+"audit", `{}`)
	if r.Runs.Load() != 2 {
		t.Fatalf("the route skipped by its full route ran %d times, want 2", r.Runs.Load())
	}
}

// FailureIsNotRecorded checks that a handler's 5xx is not recorded: with
// fail set, POST /orders/9's handler answers 503 naming "busy"; the retry
// under the same key, fail cleared, runs the handler again.
func FailureIsNotRecorded(t *testing.T, r Routes, fail *bool) {
	t.Helper()
	r.Runs.Store(0)
	*fail = true
	if r1 := Post(r.Handler, "/orders/9", r.Key+"busy", `{}`); r1.Code != 503 || !strings.Contains(r1.Body.String(), "busy") {
		t.Fatalf("handler's 503: %d %s", r1.Code, r1.Body)
	}
	*fail = false
	if r2 := Post(r.Handler, "/orders/9", r.Key+"busy", `{}`); r2.Code != 201 || r.Runs.Load() != 2 {
		t.Fatalf("the retry after a 503: %d %s runs %d; want it run again", r2.Code, r2.Body, r.Runs.Load())
	}
}

// PlainMiddlewareIsAConfigurationError checks that h, a router given
// guard.Middleware where the router does not hand it the route, answers a
// keyed POST /orders/1 500 idemkit.server_configuration_error and runs
// nothing (ran: set by the route's handler).
func PlainMiddlewareIsAConfigurationError(t *testing.T, h http.Handler, key string, ran *bool) {
	t.Helper()
	if rec := Post(h, "/orders/1", key, `{}`); rec.Code != 500 || !strings.Contains(rec.Body.String(), idem.CodeServerConfiguration) || *ran {
		t.Fatalf("%d %s (ran %v)", rec.Code, rec.Body, *ran)
	}
}

// PanicsNamingTheWiring checks that wire (a Middleware call missing what
// it needs) panics with a message that shows the right wiring.
func PanicsNamingTheWiring(t *testing.T, wiring string, wire func()) {
	t.Helper()
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), wiring) {
			t.Fatalf("panic %v; want one naming the wiring %s", p, wiring)
		}
	}()
	wire()
}

// OneParamNameAtTwoLevels checks h, a router under the adapter's
// middleware with one route POST /shops/{id}/orders/{id} (the parameter
// named by a group or sub-router and again by the route in it) whose
// handler answers 201 and counts its runs in runs: both values route the
// request, so both are in the fingerprint, and the same key and body on
// another shop's order 1, or on the same shop's order 2, is a 409
// mismatch, never the first answer replayed. key is the scenario's key.
func OneParamNameAtTwoLevels(t *testing.T, h http.Handler, key string, runs *int) {
	t.Helper()
	first := Post(h, "/shops/A/orders/1", key, `{}`)
	if first.Code != 201 || *runs != 1 {
		t.Fatalf("first: %d %s (runs %d)", first.Code, first.Body, *runs)
	}
	other := Post(h, "/shops/B/orders/1", key, `{}`)
	if other.Code != 409 || *runs != 1 {
		t.Fatalf("same key on shop B's order 1: %d %v %s (runs %d); want 409 idempotency_key_mismatch, never shop A's answer",
			other.Code, other.Header(), other.Body, *runs)
	}
	other = Post(h, "/shops/A/orders/2", key, `{}`)
	if other.Code != 409 || *runs != 1 {
		t.Fatalf("same key on shop A's order 2: %d %v %s (runs %d); want 409 idempotency_key_mismatch, never order 1's answer",
			other.Code, other.Header(), other.Body, *runs)
	}
}
