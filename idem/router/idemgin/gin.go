// Package idemgin puts a gin engine's routes under idempotency: the
// routed operation of each request is the gin route that serves it
// ("POST /orders/:id", gin's FullPath), and the values of the route's
// parameters are in the request's fingerprint.
//
//	r := gin.New()
//	r.Use(idemgin.Middleware(guard))
//	r.POST("/orders/:id", createOrder)
//
// The handlers' context is c.Request.Context(): the claim's, which ends
// with cause idem.ErrLeaseLost when the lease is lost and which
// idem.Transact and idem.FromContext read. gin's own Context passes it on
// only when the engine's ContextWithFallback is set; without it, a
// handler that gives c as its context neither sees the lease end nor
// finds its claim (idem.Transact returns idem.ErrNoClaim). Once the
// middleware returns, c.Request is again the request the middlewares
// before it gave it, whose context outlives the claim's.
//
// gin's handlers are not net/http handlers, so guard.Middleware cannot be
// given to gin's Use. It is a module of its own, so that a program using
// gin links no other router.
package idemgin

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit/idem"
)

// Middleware returns the gin middleware that guards the routes of the
// engine or group whose Use it is given to: a request's operation is its
// method and gin's full path of the route (a group's prefix included),
// the route's parameters are in the fingerprint with the request's host
// (gin routes by path alone, so a program serving several hosts or ports
// runs an engine for each behind a switch of its own, one Guard on all:
// one key on two engines' routes of one path is never one answer, and a
// retry is a replay only when sent to the same host, as a client's retry
// is), and a request no route serves (gin's 404 or 405) passes straight
// through: a handler given to NoRoute or NoMethod is not guarded, so one
// that changes state runs again on every retry. The handlers after it
// run inside the claim with their response buffered, so that it can be
// recorded and replayed; a replay runs none of them. Config.Routes is
// keyed by that operation. Give it to Use before the routes are
// registered: gin copies an engine's or group's middlewares into each
// route when the route is registered, so a route registered before Use
// never runs it and is not guarded. Handlers that end having written
// nothing but an error (c.Error) leave the answer to the middleware
// before this one that renders c.Errors, as gin's own handlers do: the
// key is released, not recorded (a retry runs again), and that answer
// goes out as it is rendered; one given to Use after this middleware
// renders inside the claim, and its answer is recorded as any other.
// Handlers that return without a word (no status, no body) once their
// request's context ended, or once the Guard cut their lease (the
// context c.Request carries ended with idem.ErrLeaseLost), bailed out,
// as behind net/http: the key is released, never an empty 200 recorded.
// It panics when guard is nil: a wiring mistake, reported at start-up.
func Middleware(guard *idem.Guard) gin.HandlerFunc {
	if guard == nil {
		panic("idemgin: Middleware(guard) needs the Guard: r.Use(idemgin.Middleware(guard))")
	}
	return func(c *gin.Context) {
		full := c.FullPath()
		if full == "" { // no route: gin answers it
			c.Next()
			return
		}
		route := func(r *http.Request) (string, map[string]string, bool) {
			params := make(map[string]string, len(c.Params)+1)
			for _, p := range c.Params {
				addParam(params, p.Key, p.Value)
			}
			// gin routes by method and path alone: a program serving
			// several hosts or ports runs an engine for each behind a
			// switch of its own, which the middleware cannot see, so
			// the host the request was sent to is in the fingerprint.
			params[hostParam] = strings.ToLower(r.Host)
			return r.Method + " " + full, params, true
		}
		outer, req := c.Writer, c.Request
		failed := false
		defer func() {
			// The middlewares before this one read their own request
			// again, not the claim's, whose context ends with the claim
			// (RED_TEAM 457).
			c.Request = req
			// The handlers failed with c.Error and wrote nothing: the
			// Guard released the key (a retry runs again) and the
			// answer is the error middleware's, before this one.
			if failed {
				if p := recover(); p != nil && p != http.ErrAbortHandler {
					panic(p)
				}
			}
		}()
		guard.Routed(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.Request = r
			bw := &writer{ResponseWriter: w, size: -1}
			c.Writer = bw
			// gin's own writer again also when a handler panics (the
			// Guard answers 500): the middlewares before this one read
			// the status that went out, not the buffered one.
			defer func() { c.Writer = outer }()
			errs := len(c.Errors)
			c.Next()
			if !bw.Written() && len(c.Errors) > errs {
				// No answer but an error for a middleware outside to
				// render (RED_TEAM 454): not a 200 to record. An aborted
				// response releases the record and writes nothing.
				failed = true
				// The status and headers the handlers set go out as gin
				// sends them, unless that middleware sets its own.
				for k, vs := range w.Header() {
					outer.Header()[k] = vs
				}
				if bw.status != 0 {
					outer.WriteHeader(bw.status)
				}
				panic(http.ErrAbortHandler)
			}
			if bw.status != 0 {
				// A status without a body. Without one, nothing is
				// committed: a handler that returns without a word once
				// its context ended bailed out, and the Guard releases
				// the record as behind net/http (RED_TEAM 531); else it
				// answers gin's 200 as gin would.
				bw.WriteHeaderNow()
			}
		})).ServeHTTP(outer, c.Request)
		c.Abort() // the handlers ran inside the claim, or a replay answered for them
	}
}

// hostParam names, among a route's parameters in the fingerprint, the
// host the request was sent to: no gin path parameter has a name with a
// slash.
const hostParam = "/host"

// writer is the gin.ResponseWriter the handlers write to inside the
// claim: it writes through to the Guard's ResponseWriter, which buffers
// the response to record it (or, on a request the Guard passes through,
// gin's own writer).
type writer struct {
	http.ResponseWriter
	status int
	size   int // -1 until the header is written
}

var _ gin.ResponseWriter = (*writer)(nil)

func (w *writer) WriteHeader(code int) {
	if code > 0 && w.size == -1 {
		w.status = code
	}
}

func (w *writer) WriteHeaderNow() {
	if w.size == -1 {
		w.size = 0
		w.ResponseWriter.WriteHeader(w.Status())
	}
}

func (w *writer) Write(b []byte) (int, error) {
	w.WriteHeaderNow()
	n, err := w.ResponseWriter.Write(b)
	w.size += n
	return n, err
}

func (w *writer) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

func (w *writer) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

func (w *writer) Size() int     { return w.size }
func (w *writer) Written() bool { return w.size != -1 }

// Hijack is refused on a buffered response (a guarded request's); a
// request the Guard passes through reaches gin's own writer.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := w.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("idemgin: a response under idempotency is buffered and cannot be hijacked")
}

// Flush writes the status the handler gave first, as gin's own writer
// does, then flushes gin's own writer; a buffered response is sent whole
// (the Guard's writer flushes nothing early).
func (w *writer) Flush() {
	w.WriteHeaderNow()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer below, as gin's
// own writer does: the read and write deadlines a handler sets through it
// are the connection's (RED_TEAM 410).
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// CloseNotify is gin's deprecated notification; it never fires here (use
// the request's context).
func (w *writer) CloseNotify() <-chan bool { return make(chan bool) }

func (w *writer) Pusher() http.Pusher {
	if p, ok := w.ResponseWriter.(http.Pusher); ok {
		return p
	}
	return nil
}

// addParam adds the path parameter k=v to params. gin lets a group name a
// parameter as a route in it does ("/shops/:id" around "/orders/:id"),
// and both values route the request: a name met again is added as
// name/2, name/3 (outermost first), which no gin parameter is named ('/'
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
