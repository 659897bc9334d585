package idemchi_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemchi"
)

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
			g := routertest.Guard(t, map[string]idem.Route{"POST /shops/{shop}/audit/{id}": {Skip: true}})
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
			bases := []string{"/orders/", "/shops/s1/orders/"}
			if onSub {
				bases = bases[1:]
			}
			routertest.GuardsEachRoute(t, routertest.Routes{Handler: r, Key: key, Runs: &runs, Bases: bases})
		})
	}
}

// TestPlainMiddlewareOnUseIsAConfigurationError is why this package
// exists: chi runs Use middlewares before routing, so guard.Middleware
// finds no pattern and answers every keyed request 500
// idemkit.server_configuration_error, running nothing.
func TestPlainMiddlewareOnUseIsAConfigurationError(t *testing.T) {
	g := routertest.Guard(t, nil)
	ran := false
	r := chi.NewRouter()
	r.Use(g.Middleware)
	r.Post("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(201) })
	routertest.PlainMiddlewareIsAConfigurationError(t, r, key, &ran)
}

func TestMiddlewareNeedsTheRouter(t *testing.T) {
	routertest.PanicsNamingTheWiring(t, "r.Use(idemchi.Middleware(guard, r))", func() { idemchi.Middleware(routertest.Guard(t, nil), nil) })
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
		rec := routertest.Post(r, path, "example-key-000000000000000001", `{"qty":1}`)
		fmt.Println(path, rec.Code, rec.Body.String())
	}
	fmt.Println("runs:", runs)
	// Output:
	// /orders/7 201 {"order":"7"}
	// /orders/7 201 {"order":"7"}
	// /orders/8 409 {"error":"idempotency_key_mismatch","message":"The Idempotency-Key has already been used with a different request payload."}
	// runs: 1
}

// TestPlainMiddlewareOnAChiRouteNeverSharesAnAnswer: guard.Middleware
// given to a chi route (inline, With, where chi has routed the request
// and set its Request.Pattern and path values) reads chi's pattern, which
// is not a ServeMux pattern when it has a "*" wildcard or a parameter
// with a regexp: the path the pattern does not determine is in the
// fingerprint, so the same key and body on another file or order is a
// 409 mismatch, never the first one's answer.
func TestPlainMiddlewareOnAChiRouteNeverSharesAnAnswer(t *testing.T) {
	for _, c := range []struct{ pattern, first, other string }{
		{"/files/*", "/files/a", "/files/b"},
		{"/orders/{id:[0-9]+}", "/orders/1", "/orders/2"},
		{"/orders/{id}/pay", "/orders/1/pay", "/orders/2/pay"},
	} {
		t.Run(c.pattern, func(t *testing.T) {
			var runs atomic.Int32
			g := routertest.Guard(t, nil)
			r := chi.NewRouter()
			r.With(g.Middleware).Post(c.pattern, func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				w.WriteHeader(201)
				fmt.Fprintf(w, `{"path":%q,"run":%d}`, r.URL.Path, n)
			})
			first, again := routertest.Post(r, c.first, key, `{"qty":1}`), routertest.Post(r, c.first, key, `{"qty":1}`)
			if first.Code != 201 || again.Body.String() != first.Body.String() || runs.Load() != 1 {
				t.Fatalf("%d %s then %d %s, runs %d; want one run and its replay", first.Code, first.Body, again.Code, again.Body, runs.Load())
			}
			if other := routertest.Post(r, c.other, key, `{"qty":1}`); other.Code != 409 || runs.Load() != 1 {
				t.Fatalf("%s under the same key: %d %s (runs %d)", c.other, other.Code, other.Body, runs.Load())
			}
		})
	}
}

// TestUseOnTheRouterAndASubRouterRunsOnce: the middleware given to the
// top router's Use and to a sub-router's as well runs the handler once
// under one claim, and its retry is a replay.
func TestUseOnTheRouterAndASubRouterRunsOnce(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := chi.NewRouter()
	r.Use(idemchi.Middleware(g, r))
	runs := 0
	r.Route("/shops/{shop}", func(sr chi.Router) {
		sr.Use(idemchi.Middleware(g, sr))
		sr.Post("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(201) })
	})
	for i := range 2 {
		rec := routertest.Post(r, "/shops/s1/orders/1", key+"both", `{}`)
		if rec.Code != 201 || runs != 1 || (i == 1) != (rec.Header().Get(idem.HeaderOpenWOPReplay) == "true") {
			t.Fatalf("request %d: %d %v %s (runs %d)", i+1, rec.Code, rec.Header(), rec.Body, runs)
		}
	}
}

// TestOneParamNameAtTwoLevelsNeverSharesAnAnswer: chi lets a sub-router
// name a path parameter as its parent route does ("/shops/{id}" around
// "/orders/{id}"); both values route the request, so both are in the
// fingerprint: one key and body on another shop's order 1 is a 409
// mismatch, never the first shop's answer replayed, with the middleware
// on the top router and on the sub-router alike.
func TestOneParamNameAtTwoLevelsNeverSharesAnAnswer(t *testing.T) {
	for _, onSub := range []bool{false, true} {
		t.Run(fmt.Sprintf("UseOnSubRouter=%v", onSub), func(t *testing.T) {
			g := routertest.Guard(t, nil)
			r := chi.NewRouter()
			if !onSub {
				r.Use(idemchi.Middleware(g, r))
			}
			runs := 0
			r.Route("/shops/{id}", func(sr chi.Router) {
				if onSub {
					sr.Use(idemchi.Middleware(g, sr))
				}
				sr.Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
					runs++
					w.WriteHeader(201)
					fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
				})
			})
			k := fmt.Sprintf("%stwo-levels-%v", key, onSub)
			routertest.OneParamNameAtTwoLevels(t, r, k, &runs)
		})
	}
}
