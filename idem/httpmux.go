package idem

import (
	"context"
	"errors"
	"net/http"
	"sync"
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
	// matchers holds, per pattern, a ServeMux with that one pattern,
	// which sets the request's path values as the wrapped mux will.
	matchers sync.Map // pattern -> *http.ServeMux
}

// resolve returns the pattern that serves r and its path values. ok is
// false when no pattern serves r as it is (the mux answers it itself: 404,
// 405 or a redirect to the canonical path), and the request then passes
// straight through to the mux, unguarded.
func (m *muxRoutes) resolve(r *http.Request) (pattern string, values func(string) string, ok bool) {
	_, pattern = m.router.Handler(r)
	if pattern == "" {
		return "", nil, false
	}
	v, found := m.matchers.Load(pattern)
	if !found {
		one := http.NewServeMux()
		if err := register(one, pattern); err != nil {
			return "", nil, false
		}
		v, _ = m.matchers.LoadOrStore(pattern, one)
	}
	// The one-pattern mux sets the request's path values as the wrapped
	// mux will, and its handler records the request it was served.
	var matched *http.Request
	v.(*http.ServeMux).ServeHTTP(discard{}, r.WithContext(context.WithValue(r.Context(), matchedKey{}, &matched)))
	if matched == nil {
		// Served otherwise (a redirect to the canonical path): the wrapped
		// mux answers it itself.
		return "", nil, false
	}
	return pattern, matched.PathValue, true
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
