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

// TestPrefixRouteCoversTheWholePath: a PathPrefix route's template names
// only the prefix, so the rest of the path is in the fingerprint too: the
// same key and body on another file under the prefix is a 409 mismatch,
// never the first file's answer replayed.
func TestPrefixRouteCoversTheWholePath(t *testing.T) {
	var runs atomic.Int32
	g := routertest.Guard(t, nil)
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(g, r))
	r.PathPrefix("/files/").Methods("POST").HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"file":%q,"run":%d}`, r.URL.Path, n)
	})
	first := routertest.Post(r, "/files/a", key, `{"qty":1}`)
	again := routertest.Post(r, "/files/a", key, `{"qty":1}`)
	if first.Code != 201 || again.Body.String() != first.Body.String() || runs.Load() != 1 {
		t.Fatalf("%d %s then %d %s, runs %d; want one run and its replay", first.Code, first.Body, again.Code, again.Body, runs.Load())
	}
	other := routertest.Post(r, "/files/b", key, `{"qty":1}`)
	if other.Code != 409 || !strings.Contains(other.Body.String(), "idempotency_key_mismatch") || runs.Load() != 1 {
		t.Fatalf("another file under the same key: %d %s (runs %d)", other.Code, other.Body, runs.Load())
	}
}

// TestRouteWithoutAPathTemplateIsNeverUnguarded: a route matched without
// a path (by method and headers only) has no template to name its
// operation by: a keyed request to it is answered 500
// idemkit.server_configuration_error and runs nothing, never passed
// through unguarded to run once per retry.
func TestRouteWithoutAPathTemplateIsNeverUnguarded(t *testing.T) {
	g := routertest.Guard(t, nil)
	ran := false
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(g, r))
	r.Methods("POST").Headers("Content-Type", "application/json").HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran = true; w.WriteHeader(201) })
	routertest.PlainMiddlewareIsAConfigurationError(t, r, key, &ran)
}

// TestMethodsOfOneTemplateAreTheirOwnRequests: two routes of one path
// template with different methods are two operations ("POST /orders/{id}",
// "PUT /orders/{id}"): the same key and body on each runs each handler
// once, neither replays the other's answer.
func TestMethodsOfOneTemplateAreTheirOwnRequests(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(g, r))
	runs := map[string]int{}
	h := func(w http.ResponseWriter, r *http.Request) {
		runs[r.Method]++
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"method":%q}`, r.Method)
	}
	r.HandleFunc("/orders/{id}", h).Methods("POST")
	r.HandleFunc("/orders/{id}", h).Methods("PUT")
	for range 2 {
		for _, m := range []string{"POST", "PUT"} {
			req := httptest.NewRequest(m, "/orders/1", strings.NewReader(`{"qty":1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(idem.HeaderKey, key)
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code != 201 || rec.Body.String() != `{"method":"`+m+`"}` {
				t.Fatalf("%s: %d %s", m, rec.Code, rec.Body)
			}
		}
	}
	if runs["POST"] != 1 || runs["PUT"] != 1 {
		t.Fatalf("runs %v, want each method once", runs)
	}
}

// TestRoutesOfOneTemplateOnTwoHostsNeverShareAnAnswer: two routes with one
// path template told apart by their host (Host("a.example.com"),
// Host("b.example.com")) are two routes: the same key and body sent to
// the second is never the first one's answer replayed (their host
// templates are in the fingerprint, so it is a 409 mismatch).
func TestRoutesOfOneTemplateOnTwoHostsNeverShareAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(g, r))
	runs := map[string]int{}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		r.Host(host).Path("/orders").Methods("POST").HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs[host]++
			w.WriteHeader(201)
			fmt.Fprintf(w, `{"host":%q}`, host)
		})
	}
	send := func(host string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://"+host+"/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	if a := send("a.example.com"); a.Code != 201 || a.Body.String() != `{"host":"a.example.com"}` {
		t.Fatalf("a: %d %s", a.Code, a.Body)
	}
	if b := send("b.example.com"); b.Code != 409 || runs["a.example.com"] != 1 {
		t.Fatalf("b under a's key: %d %s (runs %v)", b.Code, b.Body, runs)
	}
}

// TestRoutesOfOneTemplateToldApartByMatchersNeverShareAnAnswer: routes of
// one method and path template told apart only by what the adapter cannot
// read (Headers, HeadersRegexp, MatcherFunc) are two routes: the same key
// and body sent to the second is never the first one's answer replayed (a
// 409 mismatch), named or not, and each route's own retry is still its
// replay. Routes told apart by Queries differ by the query, which the
// fingerprint covers.
func TestRoutesOfOneTemplateToldApartByMatchersNeverShareAnAnswer(t *testing.T) {
	v2 := func(r *http.Request, _ *mux.RouteMatch) bool { return r.Header.Get("X-Api-Version") == "2" }
	for _, tc := range []struct {
		name  string
		route func(r *mux.Router, v string) *mux.Route
		send  func(req *http.Request, v string)
	}{
		{"Headers", func(r *mux.Router, v string) *mux.Route { return r.Path("/orders").Headers("X-Api-Version", v) },
			func(req *http.Request, v string) { req.Header.Set("X-Api-Version", v) }},
		{"HeadersRegexp", func(r *mux.Router, v string) *mux.Route {
			return r.Path("/orders").HeadersRegexp("X-Api-Version", "^"+v+"$")
		}, func(req *http.Request, v string) { req.Header.Set("X-Api-Version", v) }},
		{"MatcherFunc", func(r *mux.Router, v string) *mux.Route {
			if v == "2" {
				return r.Path("/orders").MatcherFunc(v2)
			}
			return r.Path("/orders")
		}, func(req *http.Request, v string) { req.Header.Set("X-Api-Version", v) }},
		{"Named", func(r *mux.Router, v string) *mux.Route {
			return r.Path("/orders").Headers("X-Api-Version", v).Name("orders-v" + v)
		}, func(req *http.Request, v string) { req.Header.Set("X-Api-Version", v) }},
		{"Queries", func(r *mux.Router, v string) *mux.Route { return r.Path("/orders").Queries("v", v) },
			func(req *http.Request, v string) { req.URL.RawQuery = "v=" + v }},
		{"Subrouter", func(r *mux.Router, v string) *mux.Route {
			return r.PathPrefix("/shop").Subrouter().Path("/orders").Headers("X-Api-Version", v)
		}, func(req *http.Request, v string) { req.Header.Set("X-Api-Version", v); req.URL.Path = "/shop/orders" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := routertest.Guard(t, nil)
			r := mux.NewRouter()
			r.Use(idemmux.Middleware(g, r))
			runs := map[string]int{}
			// Version 2 first: a MatcherFunc route must come before
			// the catch-all it is told apart from.
			for _, v := range []string{"2", "1"} {
				tc.route(r, v).Methods("POST").HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					runs[v]++
					w.WriteHeader(201)
					fmt.Fprintf(w, `{"version":%q}`, v)
				})
			}
			send := func(v string) *httptest.ResponseRecorder {
				req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"qty":1}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(idem.HeaderKey, key)
				tc.send(req, v)
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, req)
				return rec
			}
			if a := send("1"); a.Code != 201 || a.Body.String() != `{"version":"1"}` {
				t.Fatalf("v1: %d %s", a.Code, a.Body)
			}
			if a := send("1"); a.Code != 201 || a.Body.String() != `{"version":"1"}` || runs["1"] != 1 {
				t.Fatalf("v1 retried: %d %s (runs %v), want its replay", a.Code, a.Body, runs)
			}
			if b := send("2"); b.Code != 409 || runs["2"] != 0 {
				t.Fatalf("v2 under v1's key: %d %s (runs %v), want 409 and v2 not run", b.Code, b.Body, runs)
			}
		})
	}
}

// TestOneParamNameAtTwoLevelsNeverSharesAnAnswer: gorilla/mux lets a
// subrouter name a variable as the PathPrefix around it does
// ("/shops/{id}" around "/orders/{id}"), and mux.Vars keeps one of the
// two values; both route the request, so both are in the fingerprint:
// one key and body on another shop's order 1 is a 409 mismatch, never
// the first shop's answer replayed.
func TestOneParamNameAtTwoLevelsNeverSharesAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(g, r))
	runs := 0
	r.PathPrefix("/shops/{id}").Subrouter().HandleFunc("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}).Methods("POST")
	routertest.OneParamNameAtTwoLevels(t, r, key+"two-levels", &runs)
}

// TestStrictSlashRedirectPassesThrough: on a router with StrictSlash, a
// keyed POST to a route's path with the other trailing slash is the
// router's 301 to the route's path, not recorded: the client's redirected
// retry of the key runs the route, and is not the 301 replayed, a
// redirect loop (RED_TEAM 456). A route whose path variable takes the
// slash, on a router without StrictSlash, stays guarded.
func TestStrictSlashRedirectPassesThrough(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		g := routertest.Guard(t, nil)
		r := mux.NewRouter().StrictSlash(true)
		runs := 0
		handler := func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(201) }
		r.HandleFunc("/orders/{id}", handler).Methods("POST")
		r.PathPrefix("/shops/{shop}").Subrouter().HandleFunc("/refunds/", handler).Methods("POST")
		var h http.Handler = r
		if wrap {
			h = idemmux.Middleware(g, r)(r)
		} else {
			r.Use(idemmux.Middleware(g, r))
		}
		for _, p := range [][2]string{{"/orders/1/", "/orders/1"}, {"/shops/s1/refunds", "/shops/s1/refunds/"}} {
			k := key + strings.ReplaceAll(p[1], "/", "-")
			for range 2 {
				if rec := routertest.Post(h, p[0], k, `{}`); rec.Code != 301 || rec.Header().Get("Location") != p[1] || rec.Header().Get(idem.HeaderOpenWOPReplay) != "" {
					t.Fatalf("wrap=%v %s: %d %v; want the router's 301 to %s, not recorded", wrap, p[0], rec.Code, rec.Header(), p[1])
				}
			}
			before := runs
			if rec := routertest.Post(h, p[1], k, `{}`); rec.Code != 201 || runs != before+1 {
				t.Fatalf("wrap=%v %s, the redirected retry: %d %v (runs %d); want the route run", wrap, p[1], rec.Code, rec.Header(), runs-before)
			}
		}
	}
	g := routertest.Guard(t, nil)
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(g, r))
	runs := 0
	r.HandleFunc("/files/{path:.*}", func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(201) }).Methods("POST")
	for range 2 {
		routertest.Post(r, "/files/a/", key+"files", `{}`)
	}
	if runs != 1 {
		t.Fatalf("a route whose variable takes the trailing slash ran %d times for a request and its retry, want once", runs)
	}
}

// TestSubrouterMethodNotAllowedPassesThrough: a subrouter's
// MethodNotAllowedHandler, like the router's and like either's
// NotFoundHandler, answers a request no route serves, unguarded and not
// recorded (RED_TEAM 458).
func TestSubrouterMethodNotAllowedPassesThrough(t *testing.T) {
	for _, wrap := range []bool{false, true} {
		g := routertest.Guard(t, nil)
		r := mux.NewRouter()
		runs := 0
		answer := func(code int) http.HandlerFunc {
			return func(w http.ResponseWriter, _ *http.Request) { runs++; w.WriteHeader(code) }
		}
		r.NotFoundHandler, r.MethodNotAllowedHandler = answer(404), answer(405)
		sub := r.PathPrefix("/api").Subrouter()
		sub.NotFoundHandler, sub.MethodNotAllowedHandler = answer(404), answer(405)
		sub.HandleFunc("/orders/{id}", answer(201)).Methods("PUT")
		r.HandleFunc("/x/{id}", answer(201)).Methods("PUT")
		var h http.Handler = r
		if wrap {
			h = idemmux.Middleware(g, r)(r)
		} else {
			r.Use(idemmux.Middleware(g, r))
		}
		for _, p := range []string{"/nope", "/x/1", "/api/nope", "/api/orders/1"} {
			for i := range 2 {
				before := runs
				if rec := routertest.Post(h, p, key+"unrouted", `{}`); rec.Header().Get(idem.HeaderOpenWOPReplay) != "" || runs != before+1 || rec.Code < 404 {
					t.Fatalf("wrap=%v %s, request %d: %d %v (ran %d); want the router's answer, run again", wrap, p, i+1, rec.Code, rec.Header(), runs-before)
				}
			}
		}
	}
}
