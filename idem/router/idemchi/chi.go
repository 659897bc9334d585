// Package idemchi puts a chi router's routes under idempotency: the
// routed operation of each request is the chi pattern that serves it
// ("POST /orders/{id}"), and the values of the pattern's path parameters
// are in the request's fingerprint.
//
//	r := chi.NewRouter()
//	r.Use(idemchi.Middleware(guard, r))
//	r.Post("/orders/{id}", createOrder)
//
// guard.Middleware alone cannot serve a chi router: chi runs the
// middlewares given to Use before it routes the request, so no pattern is
// known yet and every keyed request would be answered 500
// idemkit.server_configuration_error. This middleware asks the router
// itself (chi's Find) which pattern will serve the request. It is a module
// of its own, so that a program using chi links no other router.
package idemchi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/idemkit/idemkit/idem"
)

// Middleware returns the middleware that guards the routes of r, the
// router whose Use it is given to: the top router, whose sub-routers
// (Route, Mount) it covers too, or, if the top router has none, a
// sub-router inside Route or Mount, whose patterns then carry the mount's
// prefix; one of them is enough (given to both, the sub-router's runs the
// handler under the top router's claim). Given inline instead (a Group's
// Use, or With), to guard some routes only, it names each route alike. A
// request's operation is its method and the full chi pattern that serves
// it, the pattern's path parameters (a "*" wildcard's rest among them)
// are in the fingerprint, and a request no route serves (chi's 404 or
// 405) passes straight through. Config.Routes is keyed by that operation.
// Give it to Use after any middleware that rewrites the path
// (middleware.StripSlashes, a prefix stripped): it asks the router with
// the path as it stands when it runs, so a request that only a later
// rewrite makes routable passes through unguarded, and runs again on
// every retry. A request whose path such a middleware rewrote has its own
// path in the fingerprint too (URLFormat routes /orders/1.json and
// /orders/1.xml alike, and its handler answers each in its format: one
// key on both is a 409 mismatch, never one answer).
// It panics when guard or r is nil: a wiring mistake, reported at
// start-up.
func Middleware(guard *idem.Guard, r chi.Routes) func(http.Handler) http.Handler {
	if guard == nil || r == nil {
		panic("idemchi: Middleware(guard, r) needs the Guard and the chi router whose Use it is given to: r.Use(idemchi.Middleware(guard, r))")
	}
	route := func(req *http.Request) (string, map[string]string, bool) {
		outer := chi.RouteContext(req.Context())
		urlPath, mounted := req.URL.RawPath, outer != nil && outer.RoutePath != ""
		if urlPath == "" {
			urlPath = req.URL.Path
		}
		path := urlPath
		if mounted {
			// Inside a mounted sub-router (or after a middleware that
			// rewrites the path chi routes): the rest of the path, under
			// the pattern that mounted it.
			path = outer.RoutePath
		}
		if path == "" {
			path = "/"
		}
		rctx := chi.NewRouteContext()
		pattern := r.Find(rctx, req.Method, path)
		if pattern == "" {
			return "", nil, false
		}
		params, prefix := map[string]string{}, ""
		if mounted {
			prefix = mountPrefix(outer, rctx, urlPath)
			for i, k := range outer.URLParams.Keys {
				if k != "*" {
					addParam(params, k, outer.URLParams.Values[i])
				}
			}
		}
		for i, k := range rctx.URLParams.Keys {
			// A mount's "*" holds the rest of the path the sub-router
			// routed; only a route's own trailing "*" is a parameter.
			if k != "*" || strings.HasSuffix(pattern, "*") {
				addParam(params, k, rctx.URLParams.Values[i])
			}
		}
		if mounted && rewritten(urlPath, outer) {
			// The path chi routes is not the request's (URLFormat's
			// "/orders/1" for "/orders/1.json", StripSlashes, CleanPath):
			// what the rewrite took off may be read by the handler (the
			// format), so the request's own path is in the fingerprint
			// too (RED_TEAM 528).
			params[pathParam] = urlPath
		}
		return req.Method + " " + prefix + pattern, params, true
	}
	return func(next http.Handler) http.Handler { return guard.Routed(route, next) }
}

// pathParam names, among a route's parameters in the fingerprint, the
// request's path, when a middleware rewrote the path chi routes: no chi
// parameter has a name with a slash.
const pathParam = "/path"

// rewritten reports whether the path chi routes, outer.RoutePath, is not
// the request's path (urlPath, escaped as chi reads it): at the top router
// (no pattern routed yet) chi sets no RoutePath of its own, so one that
// differs from urlPath is a middleware's rewrite; inside a mount it is the
// rest of the path, which urlPath ends with unless rewritten ("/" is the
// mount's own root, "/api" or "/api/").
func rewritten(urlPath string, outer *chi.Context) bool {
	if len(outer.RoutePatterns) == 0 {
		return outer.RoutePath != urlPath
	}
	return outer.RoutePath != "/" && !strings.HasSuffix(urlPath, outer.RoutePath)
}

// mountPrefix returns the pattern of the mounts above the router the
// middleware was given, in chi's spelling ("/shops/{shop}"), from outer,
// the request's routing so far; ours are the patterns the router's own
// Find routes the rest of the path by. Given to Use, the middleware runs
// before the router routes: outer's patterns are all the mounts', the
// last one entered (its "*" parameter emptied as chi enters a mount).
// Inline (Group, With) it runs once the router has routed the request,
// and outer's patterns end with the first of ours (the route's, or a
// mount of the router's own not yet entered), which are not the prefix:
// taken for it, they named the route "POST /api/orders/{id}/orders/{id}",
// which no Config.Routes entry matches (RED_TEAM 526). A route of ours
// ending in a wildcard, routed with an empty rest, ends outer's patterns
// with an empty "*" as an entered mount does: outer's patterns then end
// with all of ours, the last of ours with its "*" empty too, and are
// ours when the patterns before them consume the path before the rest
// chi routes, urlPath less outer.RoutePath (RED_TEAM 553); a sub-router
// given to Use whose wildcard route repeats the pattern it is mounted
// under (Mount("/x", sub), sub.Post("/x/*", h), POST /x/x/) has that
// path one mount longer.
func mountPrefix(outer *chi.Context, find *chi.Context, urlPath string) string {
	routed, ours := outer.RoutePatterns, find.RoutePatterns
	n := len(routed)
	entered := n > 0 && strings.HasSuffix(routed[n-1], "/*") && emptyRest(&outer.URLParams)
	if entered && len(ours) <= n && slices.Equal(routed[n-len(ours):], ours) && emptyRest(&find.URLParams) {
		entered = !consumes(routed[:n-len(ours)], urlPath, outer.RoutePath)
	}
	if !entered {
		for j := min(len(routed), len(ours)); j > 0; j-- {
			if slices.Equal(routed[len(routed)-j:], ours[:j]) {
				n = len(routed) - j
				break
			}
		}
	}
	x := chi.NewRouteContext()
	x.RoutePatterns = routed[:n]
	return strings.TrimSuffix(x.RoutePattern(), "/*")
}

// consumes reports whether mounts, patterns chi entered, consume the
// path before rest in urlPath: as many segments as their patterns have,
// each less its "/*", or its trailing "/" (the "/api/" a Mount("/api")
// routes its root by, whose rest is "/": RED_TEAM 584). A rest urlPath
// does not end with (a middleware rewrote the path) cannot be told apart,
// and is taken as consumed.
func consumes(mounts []string, urlPath, rest string) bool {
	before, ok := strings.CutSuffix(urlPath, rest)
	if !ok {
		return true
	}
	segments := 0
	for _, m := range mounts {
		m = strings.TrimSuffix(m, "/*")
		segments += strings.Count(strings.TrimSuffix(m, "/"), "/")
	}
	return strings.Count(before, "/") == segments
}

// emptyRest reports whether the last of params is a "*" with no value:
// the rest of a mount chi has entered, or of a wildcard route that
// matched nothing after its prefix.
func emptyRest(params *chi.RouteParams) bool {
	keys, values := params.Keys, params.Values
	return len(keys) > 0 && keys[len(keys)-1] == "*" && len(values) == len(keys) && values[len(values)-1] == ""
}

// addParam adds the path parameter k=v to params. chi lets a sub-router
// name a parameter as a route around it does ("/shops/{id}" around
// "/orders/{id}"), and both values route the request: a name met again
// is added as name/2, name/3 (outermost first), which no chi parameter
// is named ('/' ends a pattern's segment), so neither value is lost
// from the fingerprint.
func addParam(params map[string]string, k, v string) {
	if _, dup := params[k]; !dup {
		params[k] = v
		return
	}
	for n := 2; ; n++ {
		name := k + "/" + strconv.Itoa(n)
		if _, taken := params[name]; !taken {
			params[name] = v
			return
		}
	}
}
