package idemchi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemchi"
)

func newGuard(t testing.TB, routes map[string]idem.Route) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"), Routes: routes,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func post(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(idem.HeaderKey, key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const key = "chi-key-00000000000000000000001"

// TestUseOnTheRouterGuardsEachPattern: r.Use(idemchi.Middleware(guard, r))
// guards every route by its chi pattern, on the top router and inside a
// sub-router (Route, with its own Use): the same key and body on the same
// order is a replay and the handler runs once, on another order (another
// path parameter value) a 409 mismatch, a path no route serves is chi's
// own 404, and Config.Routes is keyed by method and full pattern.
func TestUseOnTheRouterGuardsEachPattern(t *testing.T) {
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"order":%q,"run":%d}`, chi.URLParam(r, "id"), n)
	}
	for _, onSub := range []bool{false, true} {
		t.Run(fmt.Sprintf("UseOnSubRouter=%v", onSub), func(t *testing.T) {
			g := newGuard(t, map[string]idem.Route{"POST /shops/{shop}/audit/{id}": {Skip: true}})
			r := chi.NewRouter()
			if !onSub {
				r.Use(idemchi.Middleware(g, r))
				r.Post("/orders/{id}", handler)
			}
			r.Route("/shops/{shop}", func(sr chi.Router) {
				if onSub {
					sr.Use(idemchi.Middleware(g, sr))
				}
				sr.Post("/orders/{id}", handler)
				sr.Post("/audit/{id}", handler)
			})
			guardedByPattern(t, r, &runs, onSub)
		})
	}
}

func guardedByPattern(t *testing.T, r http.Handler, runs *atomic.Int32, onSub bool) {
	t.Helper()
	bases := []string{"/orders/", "/shops/s1/orders/"}
	if onSub {
		bases = bases[1:]
	}
	for _, base := range bases {
		runs.Store(0)
		k := key + strings.ReplaceAll(base, "/", "-")
		first := post(r, base+"1", k, `{"qty":1}`)
		again := post(r, base+"1", k, `{"qty":1}`)
		if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() || runs.Load() != 1 {
			t.Fatalf("%s: %d %s then %d %s, runs %d; want one run and its replay", base, first.Code, first.Body, again.Code, again.Body, runs.Load())
		}
		if other := post(r, base+"2", k, `{"qty":1}`); other.Code != 409 || !strings.Contains(other.Body.String(), "idempotency_key_mismatch") || runs.Load() != 1 {
			t.Fatalf("%s: another order under the same key: %d %s", base, other.Code, other.Body)
		}
	}
	if other := post(r, "/shops/s2/orders/1", key+"-shops-s1-orders-", `{"qty":1}`); other.Code != 409 {
		t.Fatalf("another shop (the mount's parameter) under the same key: %d %s", other.Code, other.Body)
	}
	if nf := post(r, "/nowhere", key+"nf", `{}`); nf.Code != 404 {
		t.Fatalf("no route: %d %s", nf.Code, nf.Body)
	}
	runs.Store(0)
	post(r, "/shops/s1/audit/1", key+"audit", `{}`)
	post(r, "/shops/s1/audit/1", key+"audit", `{}`)
	if runs.Load() != 2 {
		t.Fatalf("the route skipped by its full pattern ran %d times, want 2", runs.Load())
	}
}

// TestPlainMiddlewareOnUseIsAConfigurationError is why this package
// exists: chi runs Use middlewares before routing, so guard.Middleware
// finds no pattern and answers every keyed request 500
// idemkit.server_configuration_error, running nothing.
func TestPlainMiddlewareOnUseIsAConfigurationError(t *testing.T) {
	g := newGuard(t, nil)
	ran := false
	r := chi.NewRouter()
	r.Use(g.Middleware)
	r.Post("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(201) })
	if rec := post(r, "/orders/1", key, `{}`); rec.Code != 500 || !strings.Contains(rec.Body.String(), idem.CodeServerConfiguration) || ran {
		t.Fatalf("%d %s (ran %v)", rec.Code, rec.Body, ran)
	}
}

func TestMiddlewareNeedsTheRouter(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "r.Use(idemchi.Middleware(guard, r))") {
			t.Fatalf("panic %v; want one naming the wiring", p)
		}
	}()
	idemchi.Middleware(newGuard(t, nil), nil)
}

// A chi router under idempotency: the second request with the same key
// and body is a replay; the same key on another order is refused.
func ExampleMiddleware() {
	guard, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	r := chi.NewRouter()
	r.Use(idemchi.Middleware(guard, r))
	runs := 0
	r.Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%q}`, chi.URLParam(r, "id"))
	})
	for _, path := range []string{"/orders/7", "/orders/7", "/orders/8"} {
		rec := post(r, path, "example-key-000000000000000001", `{"qty":1}`)
		fmt.Println(path, rec.Code, rec.Body.String())
	}
	fmt.Println("runs:", runs)
	// Output:
	// /orders/7 201 {"order":"7"}
	// /orders/7 201 {"order":"7"}
	// /orders/8 409 {"error":"idempotency_key_mismatch","message":"The Idempotency-Key has already been used with a different request payload."}
	// runs: 1
}
