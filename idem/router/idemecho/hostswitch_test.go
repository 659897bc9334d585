package idemecho_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/router/idemecho"
)

// TestServersBehindAHostSwitchNeverShareAnAnswer: echo's own recipe for
// subdomains runs an echo server per host behind a switch (an echo
// server whose catch-all hands each request to its host's server), and
// one Guard serves them all. Their routes of one path are two routes: the
// same key and body sent to b after a is 409
// idempotency_key_mismatch, b's handler not run, while a retry to a is
// a's replay. Before, b was answered 201 with a's recorded answer: the
// host was in the fingerprint only for a host's router of one server
// (Echo.Host).
func TestServersBehindAHostSwitchNeverShareAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	runs := map[string]int{}
	servers := map[string]*echo.Echo{}
	for _, host := range []string{"a.example.com", "b.example.com:8081"} {
		e := echo.New()
		e.Use(idemecho.Middleware(g))
		e.POST("/orders", func(c echo.Context) error {
			runs[host]++
			return c.String(201, host)
		})
		servers[host] = e
	}
	hostSwitch := echo.New()
	hostSwitch.Any("/*", func(c echo.Context) error {
		if e, ok := servers[strings.ToLower(c.Request().Host)]; ok {
			e.ServeHTTP(c.Response(), c.Request())
			return nil
		}
		return echo.ErrNotFound
	})
	send := func(host string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://"+host+"/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		rec := httptest.NewRecorder()
		hostSwitch.ServeHTTP(rec, req)
		return rec
	}
	for range 2 {
		if a := send("a.example.com"); a.Code != 201 || a.Body.String() != "a.example.com" || runs["a.example.com"] != 1 {
			t.Fatalf("a: %d %s (runs %v)", a.Code, a.Body, runs)
		}
	}
	if b := send("b.example.com:8081"); b.Code != http.StatusConflict || runs["b.example.com:8081"] != 0 {
		t.Fatalf("b under a's key: %d %s (runs %v), want 409 and b not run", b.Code, b.Body, runs)
	}
}

// TestHostRouterAndDefaultRouterNeverShareAnAnswer: a host's router
// (Echo.Host("a.example.com")) serves only requests whose Host is that
// name as written; one sent to A.Example.com is served by the server's
// default router, by another handler of the same path. The same key and
// body sent to the two is two requests, never one answered by the
// other's replay. Before, the default router's host was in the
// fingerprint lower-cased under the name the host's router's is under, so
// the two had one fingerprint and the default router's request was
// answered 201 with the host's router's answer, its handler not run.
func TestHostRouterAndDefaultRouterNeverShareAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	runs := map[string]int{}
	e.Host("a.example.com").POST("/orders", func(c echo.Context) error {
		runs["host"]++
		return c.String(201, "a's router")
	})
	e.POST("/orders", func(c echo.Context) error {
		runs["default"]++
		return c.String(201, "the default router")
	})
	send := func(host string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://"+host+"/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	if a := send("a.example.com"); a.Code != 201 || a.Body.String() != "a's router" {
		t.Fatalf("a: %d %s", a.Code, a.Body)
	}
	if d := send("A.Example.com"); d.Code != http.StatusConflict || runs["default"] != 0 {
		t.Fatalf("the default router's request under a's key: %d %s %v (runs %v), want 409 and its handler not run", d.Code, d.Body, d.Header(), runs)
	}
	if again := send("a.example.com"); again.Body.String() != "a's router" || runs["host"] != 1 {
		t.Fatalf("a again: %d %s (runs %v), want its replay", again.Code, again.Body, runs)
	}
}
