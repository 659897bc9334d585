package idem

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
)

// patternRouter is a router that tells which registered pattern serves a
// request, as (*http.ServeMux).Handler does.
type patternRouter interface {
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// muxRoutes resolves the routed operation of requests that reach the
// middleware before the ServeMux it wraps (guard.Middleware(mux)): the
// mux's pattern for the request and that pattern's path values, so the
// operation and the fingerprint are what they would be with the
// middleware registered on the pattern itself.
type muxRoutes struct {
	router patternRouter
	// gateOnly: Config.HTTPOperation names the operation, and the mux
	// only says which requests it routes to no pattern (serves).
	gateOnly bool
}

// serves reports whether a pattern of the router serves r as it is: not
// its 404, 405 or redirect to the canonical path.
func (m *muxRoutes) serves(r *http.Request) bool {
	h, pattern := m.router.Handler(r)
	return pattern != "" && !isRedirect(h)
}

// resolve returns the pattern that serves r and its path values. ok is
// false when no pattern serves r as it is (the router answers it itself:
// a ServeMux's 404, 405 or redirect to the canonical path), and the
// request then passes straight through to the router, unguarded. A
// pattern the router routes r to but a ServeMux would not route it by (a
// router of its own syntax, "POST /orders/{id:[0-9]+}" or "POST
// /orders/:id") is still r's pattern: its path values cannot be read
// (values nil), so the whole path is in the fingerprint instead; such a
// request is never passed through unguarded.
func (m *muxRoutes) resolve(r *http.Request) (pattern string, values func(string) string, ok bool) {
	h, pattern := m.router.Handler(r)
	if pattern == "" || isRedirect(h) {
		return "", nil, false
	}
	values, _ = pathValues(pattern, r)
	return pattern, values, true
}

// patternMatchers holds, per pattern, a ServeMux with that one pattern,
// which sets a request's path values as a ServeMux routing it by that
// pattern does (nil for a pattern a ServeMux rejects, kept so that it is
// not tried again). It keeps at most maxPatternMatchers patterns
// (patternMatcherCount counts them): a router's patterns are its routes,
// a bounded set, but a custom router that names each request's own path
// as its pattern must not grow the process's memory with every path it
// serves. A pattern beyond the bound is matched by a ServeMux built for
// the request, with the same result.
var (
	patternMatchers     sync.Map // pattern -> *http.ServeMux
	patternMatcherCount atomic.Int64
)

// maxPatternMatchers bounds patternMatchers.
const maxPatternMatchers = 4096

// pathValues returns the path values that pattern gives r as a ServeMux
// routes r by it. ok is false, and values nil, when a ServeMux would not
// route r by pattern: it rejects the pattern, or the pattern does not
// match r as a ServeMux pattern (another router's pattern, such as chi's
// "/files/*" or "/orders/{id:[0-9]+}", which chi sets as the request's
// Pattern; a path rewritten after routing, by http.StripPrefix).
func pathValues(pattern string, r *http.Request) (values func(string) string, ok bool) {
	v, found := patternMatchers.Load(pattern)
	if !found {
		one := http.NewServeMux()
		if err := register(one, pattern); err != nil {
			one = nil
		}
		if patternMatcherCount.Load() < maxPatternMatchers {
			var loaded bool
			if v, loaded = patternMatchers.LoadOrStore(pattern, one); !loaded {
				patternMatcherCount.Add(1)
			}
		} else {
			v = one
		}
	}
	one := v.(*http.ServeMux)
	if one == nil {
		return nil, false
	}
	// The one-pattern mux sets the request's path values, and its
	// handler records the request it was served.
	var matched *http.Request
	one.ServeHTTP(discard{}, r.WithContext(context.WithValue(r.Context(), matchedKey{}, &matched)))
	if matched == nil {
		return nil, false
	}
	return matched.PathValue, true
}

// redirectType is the type of the handler a ServeMux routes a request to
// when it redirects it to its canonical path.
var redirectType = reflect.TypeOf(http.RedirectHandler("/", http.StatusTemporaryRedirect))

// isRedirect reports whether h is a redirect (http.RedirectHandler), as a
// ServeMux answers a request whose path is not canonical ("/orders" under
// the pattern "/orders/", "/a//b"): such a request runs no handler.
func isRedirect(h http.Handler) bool {
	return h != nil && reflect.TypeOf(h) == redirectType
}

type matchedKey struct{}

var errBadPattern = errors.New("idem: pattern the ServeMux rejects")

// register adds pattern to mux with a handler that records the request it
// is served (with its path values), refusing a pattern mux rejects.
func register(mux *http.ServeMux, pattern string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errBadPattern
		}
	}()
	mux.HandleFunc(pattern, func(_ http.ResponseWriter, r *http.Request) {
		if dst, ok := r.Context().Value(matchedKey{}).(**http.Request); ok {
			*dst = r
		}
	})
	return nil
}

// discard is a ResponseWriter that writes nowhere.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}
