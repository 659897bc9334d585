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
