// Package idemmux puts a gorilla/mux router's routes under idempotency:
// the routed operation of each request is the route's path template that
// serves it ("POST /orders/{id}"), and the values of the template's
// variables (mux.Vars) are in the request's fingerprint.
//
//	r := mux.NewRouter()
//	r.Use(idemmux.Middleware(guard, r))
//	r.HandleFunc("/orders/{id}", createOrder).Methods("POST")
//
// guard.Middleware alone cannot serve a gorilla/mux router: the router
// does not set the request's ServeMux pattern, so no operation is known
// and every keyed request would be answered 500
// idemkit.server_configuration_error. It is a module of its own, so that
// a program using gorilla/mux links no other router.
package idemmux

import (
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/idemkit/idemkit/idem"
)

// Middleware returns the middleware that guards the routes of r: given
// to r.Use (the router has matched the route: mux.CurrentRoute), or
// wrapped around r (the middleware asks r.Match). A request's operation is
// its method and the route's full path template (a sub-router's prefix
// included), the template's variables are in the fingerprint (and, for a
// PathPrefix route, whose template names only the prefix, the whole
// path; for a route with a Host, its host template, so that one key on
// two hosts' routes of one path is never one answer), and a request no
// route serves (the router's 404 or 405) passes
// straight through. A route matched without a path (by method, host or
// headers alone) has no template to name it: a keyed request to it is
// answered 500 idemkit.server_configuration_error, never passed through
// unguarded; give such a route a Path or PathPrefix. Config.Routes is keyed by that operation. It panics when guard
// or r is nil: a wiring mistake, reported at start-up.
func Middleware(guard *idem.Guard, r *mux.Router) mux.MiddlewareFunc {
	if guard == nil || r == nil {
		panic("idemmux: Middleware(guard, r) needs the Guard and the gorilla/mux router it guards: r.Use(idemmux.Middleware(guard, r))")
	}
	route := func(req *http.Request) (string, map[string]string, bool) {
		rt, vars := mux.CurrentRoute(req), mux.Vars(req)
		if rt == nil {
			var m mux.RouteMatch
			if !r.Match(req, &m) || m.MatchErr != nil || m.Route == nil {
				return "", nil, false
			}
			rt, vars = m.Route, m.Vars
		}
		tpl, err := rt.GetPathTemplate()
		if err != nil || tpl == "" {
			// A route the router matched without a path: no template
			// names it, and the Guard answers a keyed request 500
			// rather than pass it through unguarded.
			return "", nil, true
		}
		var rest, host string
		if re, err := rt.GetPathRegexp(); err != nil || !anchored(re) {
			// A PathPrefix route: its template names the prefix, not
			// the rest of the path, which the fingerprint covers too.
			rest = req.URL.EscapedPath()
		}
		if h, err := rt.GetHostTemplate(); err == nil {
			// Routes of one path template on two hosts are two routes.
			host = h
		}
		if rest != "" || host != "" {
			params := make(map[string]string, len(vars)+2)
			for k, v := range vars {
				params[k] = v
			}
			if rest != "" {
				params[restParam] = rest
			}
			if host != "" {
				params[hostParam] = host
			}
			vars = params
		}
		return req.Method + " " + tpl, vars, true
	}
	return func(next http.Handler) http.Handler { return guard.Routed(route, next) }
}

// restParam names the whole path among a PathPrefix route's parameters,
// and hostParam a route's host template among its parameters: no
// gorilla/mux variable has a name with a colon.
const (
	restParam = ":path"
	hostParam = ":host"
)

// anchored reports whether a route's path regexp ends with an end-of-text
// anchor (a Path route's), not with a literal "$" (QuoteMeta's "\$",
// ending a PathPrefix route's).
func anchored(re string) bool {
	if !strings.HasSuffix(re, "$") {
		return false
	}
	n := 0
	for i := len(re) - 2; i >= 0 && re[i] == '\\'; i-- {
		n++
	}
	return n%2 == 0
}
