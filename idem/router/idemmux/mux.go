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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

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
// unguarded; give such a route a Path or PathPrefix. Routes of one
// method, host and path template told apart only by matchers the adapter
// cannot read (Headers, HeadersRegexp, MatcherFunc; Queries differ by the
// query, which the fingerprint covers) are as many routes: the
// fingerprint names which of them serves the request, by the route's name
// (Route.Name) when no other of them has it, else by its place among them
// in the router's order, so one key on two of them is never one answer
// (a 409 mismatch); name such routes, so that reordering them never
// changes their requests' fingerprints. Config.Routes is keyed by that
// operation. It panics when guard or r is nil: a wiring mistake, reported
// at start-up.
func Middleware(guard *idem.Guard, r *mux.Router) mux.MiddlewareFunc {
	if guard == nil || r == nil {
		panic("idemmux: Middleware(guard, r) needs the Guard and the gorilla/mux router it guards: r.Use(idemmux.Middleware(guard, r))")
	}
	var index atomic.Pointer[routeIndex]
	route := func(req *http.Request) (string, map[string]string, bool) {
		rt, vars := mux.CurrentRoute(req), mux.Vars(req)
		if rt == nil {
			var m mux.RouteMatch
			if !r.Match(req, &m) || m.MatchErr != nil || m.Route == nil {
				return "", nil, false
			}
			rt, vars = m.Route, m.Vars
		}
		if rt.GetHandler() == nil {
			// A route with no handler of its own (a subrouter's
			// PathPrefix) serves nothing: the request is the
			// subrouter's 405 (MethodNotAllowedHandler), which mux
			// answers under that route (RED_TEAM 458).
			return "", nil, false
		}
		tpl, err := rt.GetPathTemplate()
		if err != nil || tpl == "" {
			// A route the router matched without a path: no template
			// names it, and the Guard answers a keyed request 500
			// rather than pass it through unguarded.
			return "", nil, true
		}
		re, reErr := rt.GetPathRegexp()
		if reErr == nil && strictSlashRedirect(re, tpl, req.URL.Path) {
			// The router's StrictSlash redirect to the path with (or
			// without) the trailing slash, not the route's answer: it
			// passes through, so that the redirected retry of the key
			// runs the route (RED_TEAM 456).
			return "", nil, false
		}
		var rest, host string
		if reErr != nil || !anchored(re) {
			// A PathPrefix route: its template names the prefix, not
			// the rest of the path, which the fingerprint covers too.
			rest = req.URL.EscapedPath()
		}
		if h, err := rt.GetHostTemplate(); err == nil {
			// Routes of one path template on two hosts are two routes.
			host = h
		}
		if names, err := rt.GetVarNames(); err == nil && repeats(names) {
			// A variable named twice (a subrouter's "/orders/{id}"
			// under PathPrefix("/shops/{id}")): mux.Vars keeps one of
			// its values, and both route the request, so the whole
			// path (and the host, when the route has one) is in the
			// fingerprint too.
			rest = req.URL.EscapedPath()
			if host != "" {
				host += " " + strings.ToLower(req.Host)
			}
		}
		which := siblingOf(&index, r, rt, req.Method)
		if rest != "" || host != "" || which != "" {
			params := make(map[string]string, len(vars)+3)
			for k, v := range vars {
				params[k] = v
			}
			if rest != "" {
				params[restParam] = rest
			}
			if host != "" {
				params[hostParam] = host
			}
			if which != "" {
				params[routeParam] = which
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
	// routeParam names, among the parameters, which of the routes of one
	// method, host and path template serves the request (siblingOf).
	routeParam = ":route"
)

// routeIndex groups a router's routes by host and path template, each
// group in the router's order (Router.Walk). It is built when a route it
// does not hold serves a request (the first request, or a route added
// since), and replaced whole.
type routeIndex struct {
	group map[*mux.Route][]*mux.Route
}

// siblingOf returns, when other routes of rt's host and path template
// accept method too (routes the adapter cannot tell apart by what it
// reads), the identity of rt among them: "name:" and its name when none of
// the others has that name, else "#" and its place among them. It returns
// "" for a route alone in its template, whose fingerprint is unchanged.
func siblingOf(index *atomic.Pointer[routeIndex], r *mux.Router, rt *mux.Route, method string) string {
	ix := index.Load()
	if ix == nil || ix.group[rt] == nil {
		ix = buildIndex(r)
		index.Store(ix)
	}
	var same []*mux.Route
	for _, o := range ix.group[rt] {
		if accepts(o, method) {
			same = append(same, o)
		}
	}
	if len(same) < 2 {
		return ""
	}
	if name := rt.GetName(); name != "" {
		n := 0
		for _, o := range same {
			if o.GetName() == name {
				n++
			}
		}
		if n == 1 {
			return "name:" + name
		}
	}
	return "#" + strconv.Itoa(slices.Index(same, rt))
}

// buildIndex walks r's routes (its sub-routers' included) and groups the
// routes that serve requests by host and path template.
func buildIndex(r *mux.Router) *routeIndex {
	byTemplate := map[string][]*mux.Route{}
	_ = r.Walk(func(rt *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		if rt.GetHandler() == nil {
			return nil // a sub-router's own route: its routes are walked
		}
		tpl, err := rt.GetPathTemplate()
		if err != nil {
			return nil
		}
		host, _ := rt.GetHostTemplate()
		k := host + "\x00" + tpl
		byTemplate[k] = append(byTemplate[k], rt)
		return nil
	})
	ix := &routeIndex{group: map[*mux.Route][]*mux.Route{}}
	for _, group := range byTemplate {
		for _, rt := range group {
			ix.group[rt] = group
		}
	}
	return ix
}

// accepts reports whether rt may serve method: it names it among its
// Methods, or names none.
func accepts(rt *mux.Route, method string) bool {
	ms, err := rt.GetMethods()
	return err != nil || len(ms) == 0 || slices.Contains(ms, method)
}

// strictSlashRedirect reports whether a route of path template tpl and
// path regexp re, matching path, has the router answer with its
// StrictSlash redirect: the route's regexp then ends with the optional
// slash StrictSlash adds (a template's own text is quoted, its variables'
// patterns grouped, so neither ends so), and path and template differ in
// their trailing slash.
func strictSlashRedirect(re, tpl, path string) bool {
	return strings.HasSuffix(re, "[/]?$") && strings.HasSuffix(path, "/") != strings.HasSuffix(tpl, "/")
}

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

// repeats reports whether a name occurs twice in names.
func repeats(names []string) bool {
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return true
		}
	}
	return false
}
