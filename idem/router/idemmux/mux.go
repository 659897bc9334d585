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

	"github.com/gorilla/mux"

	"github.com/idemkit/idemkit/idem"
)

// Middleware returns the middleware that guards the routes of r: given
// to r.Use (the router has matched the route: mux.CurrentRoute), or
// wrapped around r (the middleware asks r.Match). A request's operation is
// its method and the route's full path template (a sub-router's prefix
// included), the template's variables are in the fingerprint, and a
// request no route serves (the router's 404 or 405) passes straight
// through. Config.Routes is keyed by that operation. It panics when guard
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
			return "", nil, false
		}
		return req.Method + " " + tpl, vars, true
	}
	return func(next http.Handler) http.Handler { return guard.Routed(route, next) }
}
