package idemmux_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/mux"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemmux"
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
	req.Header.Set(idem.HeaderKey, key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const key = "mux-key-00000000000000000000001"

// TestGuardsEachTemplate: given to r.Use, or wrapped around the router,
// the middleware guards every route by its path template, a sub-router's
// (PathPrefix().Subrouter()) included: the same key and body on the same
// order is a replay and the handler runs once, on another order a 409
// mismatch; a path no route serves is the router's 404; Config.Routes is
// keyed by method and full template.
func TestGuardsEachTemplate(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		t.Run(fmt.Sprintf("WrapTheRouter=%v", wrap), func(t *testing.T) {
			var runs atomic.Int32
			handler := func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				w.WriteHeader(201)
				fmt.Fprintf(w, `{"order":%q,"run":%d}`, mux.Vars(r)["id"], n)
			}
			g := newGuard(t, map[string]idem.Route{"POST /shops/{shop}/audit/{id}": {Skip: true}})
			r := mux.NewRouter()
			var h http.Handler = r
			if wrap {
				h = idemmux.Middleware(g, r)(r)
			} else {
				r.Use(idemmux.Middleware(g, r))
			}
			r.HandleFunc("/orders/{id}", handler).Methods("POST")
			sr := r.PathPrefix("/shops/{shop}").Subrouter()
			sr.HandleFunc("/orders/{id:[0-9]+}", handler).Methods("POST")
			sr.HandleFunc("/audit/{id}", handler).Methods("POST")
			for _, base := range []string{"/orders/", "/shops/s1/orders/"} {
				runs.Store(0)
				k := key + strings.ReplaceAll(base, "/", "-")
				first, again := post(h, base+"1", k, `{"qty":1}`), post(h, base+"1", k, `{"qty":1}`)
				if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() || runs.Load() != 1 {
					t.Fatalf("%s: %d %s then %d %s, runs %d; want one run and its replay", base, first.Code, first.Body, again.Code, again.Body, runs.Load())
				}
				if other := post(h, base+"2", k, `{"qty":1}`); other.Code != 409 || runs.Load() != 1 {
					t.Fatalf("%s: another order under the same key: %d %s", base, other.Code, other.Body)
				}
			}
			if other := post(h, "/shops/s2/orders/1", key+"-shops-s1-orders-", `{"qty":1}`); other.Code != 409 {
				t.Fatalf("another shop under the same key: %d %s", other.Code, other.Body)
			}
			if nf := post(h, "/nowhere", key+"nf", `{}`); nf.Code != 404 {
				t.Fatalf("no route: %d %s", nf.Code, nf.Body)
			}
			runs.Store(0)
			post(h, "/shops/s1/audit/1", key+"audit", `{}`)
			post(h, "/shops/s1/audit/1", key+"audit", `{}`)
			if runs.Load() != 2 {
				t.Fatalf("the route skipped by its full template ran %d times, want 2", runs.Load())
			}
		})
	}
}

// TestPlainMiddlewareIsAConfigurationError is why this package exists:
// gorilla/mux does not set the request's ServeMux pattern, so
// guard.Middleware finds no operation and answers every keyed request 500
// idemkit.server_configuration_error, running nothing.
func TestPlainMiddlewareIsAConfigurationError(t *testing.T) {
	g := newGuard(t, nil)
	ran := false
	r := mux.NewRouter()
	r.Use(g.Middleware)
	r.HandleFunc("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(201) }).Methods("POST")
	if rec := post(r, "/orders/1", key, `{}`); rec.Code != 500 || !strings.Contains(rec.Body.String(), idem.CodeServerConfiguration) || ran {
		t.Fatalf("%d %s (ran %v)", rec.Code, rec.Body, ran)
	}
}

func TestMiddlewareNeedsTheRouter(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "r.Use(idemmux.Middleware(guard, r))") {
			t.Fatalf("panic %v; want one naming the wiring", p)
		}
	}()
	idemmux.Middleware(newGuard(t, nil), nil)
}

// A gorilla/mux router under idempotency: the second request with the
// same key and body is a replay; the same key on another order is refused.
func ExampleMiddleware() {
	guard, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(guard, r))
	runs := 0
	r.HandleFunc("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%q}`, mux.Vars(r)["id"])
	}).Methods("POST")
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
