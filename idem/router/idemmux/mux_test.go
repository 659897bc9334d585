package idemmux_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/gorilla/mux"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemmux"
)

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
			g := routertest.Guard(t, map[string]idem.Route{"POST /shops/{shop}/audit/{id}": {Skip: true}})
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
			routertest.GuardsEachRoute(t, routertest.Routes{Handler: h, Key: key, Runs: &runs})
		})
	}
}

// TestPlainMiddlewareIsAConfigurationError is why this package exists:
// gorilla/mux does not set the request's ServeMux pattern, so
// guard.Middleware finds no operation and answers every keyed request 500
// idemkit.server_configuration_error, running nothing.
func TestPlainMiddlewareIsAConfigurationError(t *testing.T) {
	g := routertest.Guard(t, nil)
	ran := false
	r := mux.NewRouter()
	r.Use(g.Middleware)
	r.HandleFunc("/orders/{id}", func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(201) }).Methods("POST")
	routertest.PlainMiddlewareIsAConfigurationError(t, r, key, &ran)
}

func TestMiddlewareNeedsTheRouter(t *testing.T) {
	routertest.PanicsNamingTheWiring(t, "r.Use(idemmux.Middleware(guard, r))", func() { idemmux.Middleware(routertest.Guard(t, nil), nil) })
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
