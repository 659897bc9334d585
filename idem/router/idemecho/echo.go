// Package idemecho puts an echo server's routes under idempotency: the
// routed operation of each request is the echo route that serves it
// ("POST /orders/:id", echo's Context.Path), and the values of the
// route's parameters are in the request's fingerprint.
//
//	e := echo.New()
//	e.Use(idemecho.Middleware(guard))
//	e.POST("/orders/:id", createOrder)
//
// echo's handlers are not net/http handlers, so guard.Middleware cannot be
// given to echo's Use. It is a module of its own, so that a program using
// echo links no other router.
package idemecho

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idemkit/idem"
)

// Middleware returns the echo middleware that guards the routes of the
// server or group whose Use it is given to (Use, not Pre: echo has routed
// the request when Use's middlewares run; given to Pre, a keyed request
// to a route is answered 500 idemkit.server_configuration_error, never
// run unguarded): a request's operation is its
// method and echo's path of the route (a group's prefix included), the
// route's parameters are in the fingerprint with the host the request
// was sent to (a host's router, Echo.Host, or a server per host behind a
// switch of the program's, as echo's recipe for subdomains runs them: one
// key on two hosts' routes of one path is never one answer, and a retry
// is a replay only when sent to the same host, as a client's retry is),
// and a request no route serves passes straight
// through (echo's not-found and method-not-allowed handlers are not
// guarded: one the program sets that changes state runs again on every
// retry). The handler runs inside the claim with
// its response buffered, so that it can be recorded and replayed; a
// replay runs nothing. A handler's error is rendered there by the echo
// server's HTTPErrorHandler (so a 5xx is answered, and not recorded) and
// not returned to the middlewares before this one, which read their own
// request again once it returns (the handler's, c.Request(), carries the
// claim's context, which ends with the claim). Config.Routes is keyed
// by that operation. It panics when guard is nil: a wiring mistake,
// reported at start-up.
func Middleware(guard *idem.Guard) echo.MiddlewareFunc {
	if guard == nil {
		panic("idemecho: Middleware(guard) needs the Guard: e.Use(idemecho.Middleware(guard))")
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			path := c.Path()
			if path == "" && routable(c) {
				// Given to Pre: echo has not routed the request, and a
				// route will serve it. The Guard answers a keyed request
				// 500 server_configuration_error rather than run it
				// unguarded (RED_TEAM 459).
				return preRouted(guard, next, c)
			}
			if path == "" || unrouted(c.Handler()) || groupNotFound(c) {
				// No route serves the request (a path echo matched with
				// no route for the method is its 405; a group's
				// catch-all its 404): echo answers it.
				return next(c)
			}
			route := func(r *http.Request) (string, map[string]string, bool) {
				names, values := c.ParamNames(), c.ParamValues()
				params := make(map[string]string, len(names)+1)
				for i, n := range names {
					if i < len(values) {
						addParam(params, n, values[i])
					}
				}
				if _, ok := c.Echo().Routers()[r.Host]; ok {
					// Routed by the router of its host (Echo.Host):
					// routes of one path on two hosts are two routes.
					params[hostParam] = r.Host
				} else {
					// echo's own recipe for subdomains runs a server
					// per host behind a switch of the program's, which
					// the middleware cannot see: the host the request
					// was sent to is in the fingerprint, as gin's is
					// (RED_TEAM 529), under a name of its own: a host
					// name a host's router keeps, lower-cased from
					// another spelling the default router served, is
					// another route's request (RED_TEAM 555).
					params[sentHostParam] = strings.ToLower(r.Host)
				}
				return r.Method + " " + path, params, true
			}
			res, req := c.Response(), c.Request()
			// The middlewares before this one read their own request
			// again, not the claim's, whose context ends with the claim
			// (RED_TEAM 457).
			defer c.SetRequest(req)
			guarded := req
			if req.Body != nil && req.Body != http.NoBody {
				guarded = new(http.Request)
				*guarded = *req
				guarded.Body = bodyLimitBody{req.Body}
			}
			outer := res.Writer
			sw := &statusWriter{ResponseWriter: outer}
			guard.Routed(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if b, ok := r.Body.(bodyLimitBody); ok {
					// Passed through unread (no key, a skipped route):
					// the handler reads echo's own errors, as it would
					// without the Guard.
					r.Body = b.ReadCloser
				}
				c.SetRequest(r)
				res.Writer, res.Status, res.Size, res.Committed = w, 0, 0, false
				if err := next(c); err != nil {
					c.Error(err)
				}
				res.Writer = outer
			})).ServeHTTP(sw, guarded)
			res.Writer = outer
			if sw.status != 0 {
				res.Status, res.Size, res.Committed = sw.status, sw.size, true
			}
			return nil
		}
	}
}

// unrouted reports whether h is the handler echo's router gives a request
// no route serves: echo.NotFoundHandler, or echo.MethodNotAllowedHandler
// for a path it matched with no route for the request's method (the
// request then has echo's path of the route all the same).
func unrouted(h echo.HandlerFunc) bool {
	p := reflect.ValueOf(h).Pointer()
	return p == reflect.ValueOf(echo.NotFoundHandler).Pointer() || p == reflect.ValueOf(echo.MethodNotAllowedHandler).Pointer()
}

// routable reports whether a state-changing request that has no echo
// path of a route yet (its middleware was given to Pre, or no route
// serves it) is one a route of the echo server will serve.
func routable(c echo.Context) bool {
	req := c.Request()
	if req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return false
	}
	e := c.Echo()
	router := e.Router()
	if r, ok := e.Routers()[req.Host]; ok {
		router = r
	}
	probe := e.NewContext(req, nil)
	router.Find(req.Method, echo.GetPath(req), probe)
	return probe.Path() != "" && !unrouted(probe.Handler()) && !groupNotFound(probe)
}

// preRouted runs next for c under a route the Guard cannot name: a keyed
// request is answered 500 idemkit.server_configuration_error, one the
// Guard passes through runs.
func preRouted(guard *idem.Guard, next echo.HandlerFunc, c echo.Context) error {
	var err error
	guard.Routed(func(*http.Request) (string, map[string]string, bool) { return "", nil, true },
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { err = next(c) })).ServeHTTP(c.Response(), c.Request())
	return err
}

// notFoundName is the name echo gives a route whose handler is
// echo.NotFoundHandler.
var notFoundName = runtime.FuncForPC(reflect.ValueOf(echo.NotFoundHandler).Pointer()).Name()

// groupNotFound reports whether echo routed c's request to a not-found
// route (Echo.RouteNotFound) whose handler is echo.NotFoundHandler: the
// catch-alls a group given middlewares registers under its prefix ("" and
// "/*"), so that they run for every path under it. The route echo runs
// wraps the group's middlewares around the handler, so unrouted cannot
// tell it by its handler; a request no route of its method and echo path
// serves, while such a not-found route has that path, is one no route
// serves (RED_TEAM 455). A not-found route with a handler of the
// program's own is one of its routes, guarded. Only a request the Guard
// would guard (a state-changing method) looks: the router's routes are
// read whole.
func groupNotFound(c echo.Context) bool {
	req := c.Request()
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	router := c.Echo().Router()
	if r, ok := c.Echo().Routers()[req.Host]; ok {
		router = r
	}
	path, found := c.Path(), false
	for _, rt := range router.Routes() {
		if rt.Path != path {
			continue
		}
		if rt.Method == req.Method {
			return false
		}
		if rt.Method == echo.RouteNotFound && rt.Name == notFoundName {
			found = true
		}
	}
	return found
}

// hostParam names, among a route's parameters in the fingerprint, the host
// a router of that host (Echo.Host) served, as given: no echo path
// parameter has a name with a slash.
const hostParam = "/host"

// sentHostParam names, among a route's parameters in the fingerprint, the
// host a request no host's router served was sent to, lower-cased: never
// hostParam, whose value a host's router keeps as it is written.
const sentHostParam = "/host sent"

// statusWriter is echo's own ResponseWriter, noting the status and size
// of what is written to it (the Guard's answer, or the handler's when the
// Guard passes the request through).
type statusWriter struct {
	http.ResponseWriter
	status int
	size   int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.size += int64(n)
	return n, err
}

// Flush flushes echo's writer (a guarded response is sent whole).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach echo's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// addParam adds the path parameter k=v to params. echo lets a group name
// a parameter as a route in it does ("/shops/:id" around "/orders/:id"),
// and both values route the request: a name met again is added as
// name/2, name/3 (outermost first), which no echo parameter is named ('/'
// ends a path segment), so neither value is lost from the fingerprint.
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

// bodyLimitBody is a request body under echo's BodyLimit as the Guard
// reads it: the error with which BodyLimit cuts a body over its limit
// that had no Content-Length to refuse it by (sent chunked), echo's own
// 413 HTTPError, is given as net/http's *http.MaxBytesError, so that the
// Guard answers 413 payload_too_large, not 400 for a body it could not
// read (RED_TEAM 552). echo does not say its limit: the error's Limit is
// 0, and the answer names none.
type bodyLimitBody struct{ io.ReadCloser }

func (b bodyLimitBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if he := (*echo.HTTPError)(nil); err != nil && errors.As(err, &he) && he.Code == http.StatusRequestEntityTooLarge {
		return n, &http.MaxBytesError{}
	}
	return n, err
}
