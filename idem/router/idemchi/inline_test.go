package idemchi_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/router/idemchi"
)

// TestInlineInsideASubRouterNamesTheRoute: the middleware given inline
// (Group's Use, or With) inside a sub-router (Route, Mount) runs once chi
// has routed the request; its operation is still the method and the full
// chi pattern ("POST /shops/{shop}/audit/{id}"), so Config.Routes applies:
// the skipped route runs every time, the others are guarded by their
// pattern and parameters; and a mount inside the group is named under
// it. Before, the route's pattern was taken for the mount's prefix too
// ("POST /shops/{shop}/audit/{id}/audit/{id}"): no Config.Routes entry
// matched, and the skipped route was deduplicated.
func TestInlineInsideASubRouterNamesTheRoute(t *testing.T) {
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"order":%q,"run":%d}`, chi.URLParam(r, "id"), n)
	}
	for _, wiring := range []string{"Group", "With"} {
		t.Run(wiring, func(t *testing.T) {
			g := routertest.Guard(t, map[string]idem.Route{"POST /shops/{shop}/audit/{id}": {Skip: true}})
			r := chi.NewRouter()
			r.Route("/shops/{shop}", func(sr chi.Router) {
				if wiring == "Group" {
					sr.Group(func(gr chi.Router) {
						gr.Use(idemchi.Middleware(g, gr))
						gr.Post("/orders/{id}", handler)
						gr.Post("/audit/{id}", handler)
					})
					return
				}
				guarded := sr.With(idemchi.Middleware(g, sr))
				guarded.Post("/orders/{id}", handler)
				guarded.Post("/audit/{id}", handler)
			})
			routertest.GuardsEachRoute(t, routertest.Routes{Handler: r, Key: key, Runs: &runs, Bases: []string{"/shops/s1/orders/"}})
		})
	}
	t.Run("MountInsideGroup", func(t *testing.T) {
		g := routertest.Guard(t, map[string]idem.Route{"POST /shops/{shop}/m/audit/{id}": {Skip: true}})
		sub := chi.NewRouter()
		sub.Post("/audit/{id}", handler)
		r := chi.NewRouter()
		r.Route("/shops/{shop}", func(sr chi.Router) {
			sr.Group(func(gr chi.Router) {
				gr.Use(idemchi.Middleware(g, gr))
				gr.Mount("/m", sub)
			})
		})
		runs.Store(0)
		routertest.Post(r, "/shops/s1/m/audit/1", key+"m", `{}`)
		routertest.Post(r, "/shops/s1/m/audit/1", key+"m", `{}`)
		if n := runs.Load(); n != 2 {
			t.Fatalf("the route skipped by its full pattern ran %d times, want 2", n)
		}
	})
}

// TestSubRouterMountedUnderItsOwnNameNamesEachRoute: given to Use on a
// sub-router mounted at /v1 that mounts another under /v1 too, the
// middleware names the inner router's route by the mounts above it, POST
// /v1/v1/orders, never as the outer one's POST /v1/orders: one key on the
// two is two operations' requests, each run, never one answer.
func TestSubRouterMountedUnderItsOwnNameNamesEachRoute(t *testing.T) {
	g := routertest.Guard(t, nil)
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, _ *http.Request) { runs.Add(1); w.WriteHeader(201) }
	inner := chi.NewRouter()
	inner.Post("/orders", handler)
	outer := chi.NewRouter()
	outer.Use(idemchi.Middleware(g, outer))
	outer.Post("/orders", handler)
	outer.Mount("/v1", inner)
	r := chi.NewRouter()
	r.Mount("/v1", outer)
	if a := routertest.Post(r, "/v1/orders", key, `{}`); a.Code != 201 {
		t.Fatalf("/v1/orders: %d %s", a.Code, a.Body)
	}
	if b := routertest.Post(r, "/v1/v1/orders", key, `{}`); b.Code != 201 || b.Header().Get(idem.HeaderOpenWOPReplay) != "" || runs.Load() != 2 {
		t.Fatalf("/v1/v1/orders under the same key: %d %v (runs %d), want its own run, not /v1/orders' answer", b.Code, b.Header(), runs.Load())
	}
}

// TestInlineWildcardRouteWithAnEmptyRestNamesTheRoute: given inline
// (With) inside a sub-router to a route ending in a wildcard, the
// middleware names a request whose rest is empty (POST /api/files/) by the
// route's full pattern, as it names one with a rest (POST /api/files/x):
// chi empties a mount's "*" on entering it, and the route's own empty "*"
// is not that mount. Before, /api/files/ was named POST
// /api/files/files/*, so the route skipped by its pattern was deduplicated
// for that path alone. Given to Use, both were named alike already, also
// in a sub-router whose wildcard route repeats the pattern it is mounted
// under (POST /api/files/files/).
func TestInlineWildcardRouteWithAnEmptyRestNamesTheRoute(t *testing.T) {
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, _ *http.Request) { runs.Add(1); w.WriteHeader(201) }
	for _, wiring := range []string{"With", "Use", "UseUnderItsOwnName"} {
		t.Run(wiring, func(t *testing.T) {
			g := routertest.Guard(t, map[string]idem.Route{"POST /api/files/*": {Skip: true}})
			r := chi.NewRouter()
			paths := []string{"/api/files/x", "/api/files/"}
			switch wiring {
			case "Use":
				r.Route("/api", func(sr chi.Router) {
					sr.Use(idemchi.Middleware(g, sr))
					sr.Post("/files/*", handler)
				})
			case "UseUnderItsOwnName":
				// Mounted at /files inside /api, its route /files/* is
				// POST /api/files/files/*.
				g = routertest.Guard(t, map[string]idem.Route{"POST /api/files/files/*": {Skip: true}})
				sub := chi.NewRouter()
				sub.Use(idemchi.Middleware(g, sub))
				sub.Post("/files/*", handler)
				r.Route("/api", func(sr chi.Router) { sr.Mount("/files", sub) })
				paths = []string{"/api/files/files/x", "/api/files/files/"}
			default:
				r.Route("/api", func(sr chi.Router) {
					sr.With(idemchi.Middleware(g, sr)).Post("/files/*", handler)
				})
			}
			for i, path := range paths {
				runs.Store(0)
				k := fmt.Sprintf("%s-%d", key, i)
				a, b := routertest.Post(r, path, k, `{}`), routertest.Post(r, path, k, `{}`)
				if n := runs.Load(); n != 2 || b.Header().Get(idem.HeaderOpenWOPReplay) != "" {
					t.Errorf("%s: the route skipped by its full pattern ran %d times (%d, %d %v), want 2, no replay", path, n, a.Code, b.Code, b.Header())
				}
			}
		})
	}
}

// TestInlineCatchAllAtASubRoutersRootNamesTheRoute: a sub-router's
// catch-all route ("/*") given the middleware inline serves the
// sub-router's root too (POST /api/, which chi routes by the mount's own
// "/api/" pattern, no "*" emptied, then by "/*" with an empty rest); it is
// named POST /api/*, as POST /api/x is, so Config.Routes applies to both.
// Before, the mount's "/api/" was counted as two segments where it
// consumes one, the route's "/*" taken for an entered mount, and /api/
// was named POST /api//*: the route skipped by its pattern was
// deduplicated for that path alone (RED_TEAM 584, 553's sibling).
func TestInlineCatchAllAtASubRoutersRootNamesTheRoute(t *testing.T) {
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, _ *http.Request) { runs.Add(1); w.WriteHeader(201) }
	for _, wiring := range []string{"With", "Use", "WithNested", "WithUnderAParameter"} {
		t.Run(wiring, func(t *testing.T) {
			prefix := map[string]string{"WithNested": "/api/v1", "WithUnderAParameter": "/shops/s1"}[wiring]
			name := map[string]string{"WithNested": "POST /api/v1/*", "WithUnderAParameter": "POST /shops/{shop}/*"}[wiring]
			if prefix == "" {
				prefix, name = "/api", "POST /api/*"
			}
			g := routertest.Guard(t, map[string]idem.Route{name: {Skip: true}})
			r := chi.NewRouter()
			switch wiring {
			case "WithNested":
				r.Route("/api", func(a chi.Router) {
					a.Route("/v1", func(sr chi.Router) { sr.With(idemchi.Middleware(g, sr)).Post("/*", handler) })
				})
			case "WithUnderAParameter":
				r.Route("/shops/{shop}", func(sr chi.Router) { sr.With(idemchi.Middleware(g, sr)).Post("/*", handler) })
			default:
				r.Route("/api", func(sr chi.Router) {
					if wiring == "Use" {
						sr.Use(idemchi.Middleware(g, sr))
						sr.Post("/*", handler)
						return
					}
					sr.With(idemchi.Middleware(g, sr)).Post("/*", handler)
				})
			}
			for i, path := range []string{prefix + "/x", prefix + "/"} {
				runs.Store(0)
				k := fmt.Sprintf("%s-%d", key, i)
				a, b := routertest.Post(r, path, k, `{}`), routertest.Post(r, path, k, `{}`)
				if n := runs.Load(); n != 2 || b.Header().Get(idem.HeaderOpenWOPReplay) != "" {
					t.Errorf("%s: the route skipped by its full pattern ran %d times (%d, %d %v), want 2, no replay", path, n, a.Code, b.Code, b.Header())
				}
			}
		})
	}
}
