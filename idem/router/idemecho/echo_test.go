package idemecho_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemecho"
)

const key = "echo-key-0000000000000000000001"

// TestGuardsEachRoute: given to the server's Use, the middleware guards
// every route by echo's route path, a group's included: the same key and
// body on the same order is a replay and the handler runs once, on another
// order a 409 mismatch; a handler's error is rendered by echo's error
// handler and, a 5xx, not recorded (the retry runs again); a path no route
// serves is echo's 404; Config.Routes is keyed by method and full path.
func TestGuardsEachRoute(t *testing.T) {
	var runs atomic.Int32
	fail := false
	handler := func(c echo.Context) error {
		n := runs.Add(1)
		if fail {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "busy")
		}
		return c.JSON(201, map[string]any{"order": c.Param("id"), "run": n})
	}
	g := routertest.Guard(t, map[string]idem.Route{"POST /shops/:shop/audit/:id": {Skip: true}})
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	e.POST("/orders/:id", handler)
	shops := e.Group("/shops/:shop")
	shops.POST("/orders/:id", handler)
	shops.POST("/audit/:id", handler)
	routes := routertest.Routes{Handler: e, Key: key, Runs: &runs}
	routertest.GuardsEachRoute(t, routes)
	routertest.FailureIsNotRecorded(t, routes, &fail)
}

func TestMiddlewareNeedsTheGuard(t *testing.T) {
	routertest.PanicsNamingTheWiring(t, "e.Use(idemecho.Middleware(guard))", func() { idemecho.Middleware(nil) })
}

// An echo server under idempotency: the second request with the same key
// and body is a replay; the same key on another order is refused.
func ExampleMiddleware() {
	guard, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	e := echo.New()
	e.Use(idemecho.Middleware(guard))
	runs := 0
	e.POST("/orders/:id", func(c echo.Context) error {
		runs++
		return c.JSONBlob(http.StatusCreated, []byte(`{"order":"`+c.Param("id")+`"}`))
	})
	for _, path := range []string{"/orders/7", "/orders/7", "/orders/8"} {
		rec := routertest.Post(e, path, "example-key-000000000000000001", `{"qty":1}`)
		fmt.Println(path, rec.Code, rec.Body.String())
	}
	fmt.Println("runs:", runs)
	// Output:
	// /orders/7 201 {"order":"7"}
	// /orders/7 201 {"order":"7"}
	// /orders/8 409 {"error":"idempotency_key_mismatch","message":"The Idempotency-Key has already been used with a different request payload."}
	// runs: 1
}

// TestMethodsOfOneRouteAreTheirOwnRequests: two routes of one path with
// different methods (and an Any route's methods) are each their own
// operation: the same key and body on each runs each handler once,
// neither replays the other's answer; a "*" route's rest of the path is in
// the fingerprint, so the same key on another file is a mismatch.
func TestMethodsOfOneRouteAreTheirOwnRequests(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	runs := map[string]int{}
	h := func(c echo.Context) error {
		runs[c.Request().Method+" "+c.Path()]++
		return c.String(201, c.Request().Method+" "+c.Request().URL.Path)
	}
	e.POST("/orders/:id", h)
	e.PUT("/orders/:id", h)
	e.Any("/any/:id", h)
	e.POST("/files/*", h)
	send := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key+strings.ReplaceAll(path, "/", "-")[:5])
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	for range 2 {
		for _, c := range [][2]string{{"POST", "/orders/1"}, {"PUT", "/orders/1"}, {"POST", "/any/1"}, {"PATCH", "/any/1"}, {"POST", "/files/a"}} {
			if rec := send(c[0], c[1]); rec.Code != 201 || rec.Body.String() != c[0]+" "+c[1] {
				t.Fatalf("%s %s: %d %s", c[0], c[1], rec.Code, rec.Body)
			}
		}
	}
	for op, n := range runs {
		if n != 1 {
			t.Fatalf("%s ran %d times, want once (runs %v)", op, n, runs)
		}
	}
	if len(runs) != 5 {
		t.Fatalf("runs %v", runs)
	}
	if rec := send("POST", "/files/b"); rec.Code != 409 || !strings.Contains(rec.Body.String(), "idempotency_key_mismatch") {
		t.Fatalf("another file under the same key: %d %s", rec.Code, rec.Body)
	}
}

// TestRoutesOfOnePathOnTwoHostsNeverShareAnAnswer: routes of one path on
// two hosts (e.Host("a.example.com"), e.Host("b.example.com")) are two
// routes: the same key and body sent to the second is never the first
// one's answer replayed (the host whose router served the request is in
// the fingerprint, so it is a 409 mismatch).
func TestRoutesOfOnePathOnTwoHostsNeverShareAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	runs := map[string]int{}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		e.Host(host).POST("/orders", func(c echo.Context) error {
			runs[host]++
			return c.String(201, host)
		})
	}
	send := func(host string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://"+host+"/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	if a := send("a.example.com"); a.Code != 201 || a.Body.String() != "a.example.com" {
		t.Fatalf("a: %d %s", a.Code, a.Body)
	}
	if b := send("b.example.com"); b.Code != 409 || runs["a.example.com"] != 1 {
		t.Fatalf("b under a's key: %d %s (runs %v)", b.Code, b.Body, runs)
	}
}

// TestMethodNotAllowedPassesThrough: a request whose path echo routes but
// whose method no route of that path serves is echo's own 405, passed
// straight through as a 404 is: never recorded under the route's
// operation, where it would be replayed to the key's retries once a route
// for that method is added.
func TestMethodNotAllowedPassesThrough(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	e.GET("/orders/:id", func(c echo.Context) error { return c.String(200, "order") })
	send := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/orders/1", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	for range 2 {
		if rec := send(); rec.Code != 405 || rec.Header().Get(idem.HeaderOpenWOPReplay) != "" {
			t.Fatalf("%d %v %s; want echo's 405, not recorded", rec.Code, rec.Header(), rec.Body)
		}
	}
	e.POST("/orders/:id", func(c echo.Context) error { return c.String(201, "paid") })
	if rec := send(); rec.Code != 201 || rec.Body.String() != "paid" {
		t.Fatalf("the key's retry once the route exists: %d %s", rec.Code, rec.Body)
	}
}

// TestWiredOnTheServerAndAGroupRunsOnce: the middleware given to the
// server's Use and to a group's as well runs the handler once under one
// claim, and its retry is a replay (not a 409 in flight recorded by the
// outer one as the handler's answer).
func TestWiredOnTheServerAndAGroupRunsOnce(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	runs := 0
	e.Group("/api", idemecho.Middleware(g)).POST("/orders", func(c echo.Context) error { runs++; return c.String(201, "ok") })
	for i := range 2 {
		rec := routertest.Post(e, "/api/orders", key+"twice", `{}`)
		if rec.Code != 201 || runs != 1 || (i == 1) != (rec.Header().Get(idem.HeaderOpenWOPReplay) == "true") {
			t.Fatalf("request %d: %d %v %s (runs %d)", i+1, rec.Code, rec.Header(), rec.Body, runs)
		}
	}
}

// gzipMiddleware is a compression middleware as echo's own Gzip is: it
// encodes the answer with gzip when the request accepts it.
func gzipMiddleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !strings.Contains(c.Request().Header.Get("Accept-Encoding"), "gzip") {
			return next(c)
		}
		res := c.Response()
		orig := res.Writer
		rec := httptest.NewRecorder()
		res.Writer = rec
		err := next(c)
		res.Writer = orig
		for k, vs := range rec.Header() {
			orig.Header()[k] = vs
		}
		orig.Header().Set("Content-Encoding", "gzip")
		orig.WriteHeader(rec.Code)
		zw := gzip.NewWriter(orig)
		_, _ = zw.Write(rec.Body.Bytes())
		_ = zw.Close()
		return err
	}
}

// TestGzipInsideTheGuardReplaysWhatTheRetryAccepts: a compression
// middleware (echo's Gzip) given to Use after the Guard encodes the
// answer inside it, so the answer is recorded gzip-encoded; a retry that does not accept gzip gets it
// decoded, without Content-Encoding, never bytes it did not ask for.
func TestGzipInsideTheGuardReplaysWhatTheRetryAccepts(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	e.Use(gzipMiddleware)
	var runs atomic.Int32
	e.POST("/orders", func(c echo.Context) error {
		runs.Add(1)
		return c.JSON(201, map[string]any{"order": 1})
	})
	send := func(accept string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		req.Header.Set("Accept-Encoding", accept)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	if first := send("gzip"); first.Code != 201 || first.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	retry := send("identity")
	if retry.Code != 201 || retry.Header().Get("Content-Encoding") != "" || strings.TrimSpace(retry.Body.String()) != `{"order":1}` || runs.Load() != 1 {
		t.Fatalf("retry accepting identity: %d %v %q (runs %d)", retry.Code, retry.Header(), retry.Body, runs.Load())
	}
}

// TestOneParamNameAtTwoLevelsNeverSharesAnAnswer: echo lets a group name
// a path parameter as a route in it does ("/shops/:id" around
// "/orders/:id"); both values route the request, so both are in the
// fingerprint: one key and body on another shop's order 1 is a 409
// mismatch, never the first shop's answer replayed.
func TestOneParamNameAtTwoLevelsNeverSharesAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	runs := 0
	e.Group("/shops/:id").POST("/orders/:id", func(c echo.Context) error {
		runs++
		return c.String(201, fmt.Sprintf(`{"path":%q}`, c.Request().URL.Path))
	})
	routertest.OneParamNameAtTwoLevels(t, e, key+"two-levels", &runs)
}

// TestFlushingHandlerRunsOnce: an echo handler that flushes its answer as
// it goes (Response.Flush, which panics on a writer that cannot flush)
// panicked on the Guard's buffered writer, its work done, and every retry
// ran it again. The Guard's writer flushes nothing early: the answer goes
// out whole, and a retry is its replay.
func TestFlushingHandlerRunsOnce(t *testing.T) {
	var runs atomic.Int32
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	e.POST("/orders/:id", func(c echo.Context) error {
		runs.Add(1)
		c.Response().Header().Set("Content-Type", "application/json")
		c.Response().WriteHeader(201)
		_, _ = io.WriteString(c.Response(), `{"part":1`)
		c.Response().Flush()
		_, _ = io.WriteString(c.Response(), `,"part2":2}`)
		return nil
	})
	for i := range 2 {
		rec := routertest.Post(e, "/orders/7", key, `{"qty":1}`)
		if rec.Code != 201 || rec.Body.String() != `{"part":1,"part2":2}` {
			t.Fatalf("answer %d: %d %q, want 201 and the whole body", i, rec.Code, rec.Body.String())
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestGroupCatchAllPassesThrough: a group given the middleware (echo then
// routes every path under the group's prefix to its not-found catch-all
// routes, wrapped in the group's middlewares) answers a path no route of
// it serves with echo's 404, not recorded: the key's retry once the route
// exists runs it (RED_TEAM 455); likewise under the server's Use when the
// group has a middleware of its own. A not-found route the program registers
// with its own handler is one of its routes, guarded.
func TestGroupCatchAllPassesThrough(t *testing.T) {
	for _, wired := range []string{"group Use", "Group(prefix, m)", "server Use, group with a middleware of its own"} {
		g := routertest.Guard(t, nil)
		e := echo.New()
		var api *echo.Group
		switch wired {
		case "group Use":
			api = e.Group("/api")
			api.Use(idemecho.Middleware(g))
		case "Group(prefix, m)":
			api = e.Group("/api", idemecho.Middleware(g))
		default:
			e.Use(idemecho.Middleware(g))
			api = e.Group("/api", func(next echo.HandlerFunc) echo.HandlerFunc { return next })
		}
		api.POST("/orders", func(c echo.Context) error { return c.String(201, "ok") })
		api.GET("/items/:id", func(c echo.Context) error { return c.String(200, "item") })
		for _, path := range []string{"/api/refunds", "/api", "/api/items/1"} {
			for range 2 {
				if rec := routertest.Post(e, path, key+"group", `{}`); rec.Code != 404 || rec.Header().Get(idem.HeaderOpenWOPReplay) != "" {
					t.Fatalf("%s: %s: %d %v %s; want echo's 404, not recorded", wired, path, rec.Code, rec.Header(), rec.Body)
				}
			}
		}
		api.POST("/refunds", func(c echo.Context) error { return c.String(201, "refunded") })
		if rec := routertest.Post(e, "/api/refunds", key+"group", `{}`); rec.Code != 201 || rec.Body.String() != "refunded" {
			t.Fatalf("%s: the key's retry once the route exists: %d %s", wired, rec.Code, rec.Body)
		}
		var runs int
		api.RouteNotFound("/x/*", func(c echo.Context) error { runs++; return c.String(404, "custom") })
		for range 2 {
			routertest.Post(e, "/api/x/1", key+"custom", `{}`)
		}
		if runs != 1 {
			t.Fatalf("%s: the program's not-found route ran %d times for a request and its retry, want once", wired, runs)
		}
	}
}

// TestMiddlewareBeforeTheGuardKeepsItsRequest: a middleware given to Use
// before the guard reads c.Request() after next(c) as it was, not the
// claim's request, whose context is cancelled once the claim ends
// (RED_TEAM 457).
func TestMiddlewareBeforeTheGuardKeepsItsRequest(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	var seen []string
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			before := c.Request()
			err := next(c)
			_, claimed := idem.FromContext(c.Request().Context())
			seen = append(seen, fmt.Sprintf("same=%v err=%v claim=%v", c.Request() == before, c.Request().Context().Err(), claimed))
			return err
		}
	}, idemecho.Middleware(g))
	e.POST("/orders/:id", func(c echo.Context) error { return c.JSON(http.StatusCreated, map[string]int{}) })
	e.POST("/fail/:id", func(c echo.Context) error { return echo.NewHTTPError(http.StatusServiceUnavailable) })
	e.POST("/panic/:id", func(c echo.Context) error { panic("boom") })
	for _, p := range []string{"/orders/1", "/orders/1", "/fail/1", "/panic/1"} {
		routertest.Post(e, p, key+strings.ReplaceAll(p, "/", "-"), `{}`)
	}
	for i, s := range seen {
		if s != "same=true err=<nil> claim=false" {
			t.Fatalf("request %d: the middleware before the guard saw %s", i+1, s)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("the middleware before the guard ran %d times, want 4", len(seen))
	}
}

// TestGivenToPreIsAConfigurationError: given to Pre (echo has not routed
// the request yet), the middleware cannot name the route; a keyed request
// to a path a route serves is answered 500
// idemkit.server_configuration_error, as a router adapter's wiring
// mistake is, never run unguarded (RED_TEAM 459). A path no route serves
// is still echo's 404, and a request without a key runs.
func TestGivenToPreIsAConfigurationError(t *testing.T) {
	g := routertest.Guard(t, nil)
	e := echo.New()
	e.Pre(idemecho.Middleware(g))
	runs := 0
	e.POST("/orders/:id", func(c echo.Context) error { runs++; return c.String(201, "ok") })
	for range 2 {
		if rec := routertest.Post(e, "/orders/1", key+"pre", `{}`); rec.Code != 500 || !strings.Contains(rec.Body.String(), "server_configuration_error") || runs != 0 {
			t.Fatalf("keyed request through Pre: %d %s (runs %d); want 500 server_configuration_error, the handler not run", rec.Code, rec.Body, runs)
		}
	}
	if rec := routertest.Post(e, "/nowhere", key+"pre", `{}`); rec.Code != 404 {
		t.Fatalf("a path no route serves: %d %s; want echo's 404", rec.Code, rec.Body)
	}
	if rec := routertest.Post(e, "/orders/1", "", `{}`); rec.Code != 201 || runs != 1 {
		t.Fatalf("a request without a key: %d %s (runs %d); want 201", rec.Code, rec.Body, runs)
	}
}

// TestBodyLimitOnAChunkedBodyIs413: echo's BodyLimit before the Guard cuts
// a chunked body over its limit with echo's own 413 error, which the
// Guard reads before the claim: the client is told its body is too large
// (413 payload_too_large in the envelope), not that it is malformed, the
// handler does not run, and nothing is recorded (a retry with a body
// under the limit runs).
func TestBodyLimitOnAChunkedBodyIs413(t *testing.T) {
	var runs atomic.Int32
	e := echo.New()
	e.Use(middleware.BodyLimit("1K"))
	e.Use(idemecho.Middleware(routertest.Guard(t, nil)))
	e.POST("/orders/:id", func(c echo.Context) error {
		runs.Add(1)
		var v map[string]any
		if err := c.Bind(&v); err != nil {
			return err
		}
		return c.JSON(201, map[string]any{"ok": true})
	})
	send := func(body string, keyed bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/orders/7", io.MultiReader(strings.NewReader(body)))
		req.ContentLength = -1 // sent chunked: no length for BodyLimit to refuse up front
		req.Header.Set("Content-Type", "application/json")
		if keyed {
			req.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		return w
	}
	big := `{"pad":"` + strings.Repeat("x", 4096) + `"}`
	w := send(big, true)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), `"error":"payload_too_large"`) {
		t.Fatalf("chunked body over echo's BodyLimit: %d %s, want 413 payload_too_large in the envelope", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "exceeds 0 bytes") {
		t.Fatalf("the answer names a limit it does not know: %s", w.Body)
	}
	if runs.Load() != 0 {
		t.Fatalf("handler ran %d times for a refused body", runs.Load())
	}
	if w := send(`{"n":1}`, true); w.Code != 201 || runs.Load() != 1 {
		t.Fatalf("a retry under the limit: %d %s, runs %d; want 201, one run (nothing recorded before)", w.Code, w.Body, runs.Load())
	}
	// Without a key the Guard passes the request through unread: the
	// handler meets echo's own error, as it would without the Guard.
	if w := send(big, false); w.Code != http.StatusRequestEntityTooLarge || strings.Contains(w.Body.String(), "payload_too_large") {
		t.Fatalf("a keyless chunked body over the limit: %d %s, want echo's own 413", w.Code, w.Body)
	}
}
