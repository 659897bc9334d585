package idemecho_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemecho"
)

func newGuard(t testing.TB, routes map[string]idem.Route) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"), Routes: routes,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func post(h http.Handler, path, key, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idem.HeaderKey, key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

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
	g := newGuard(t, map[string]idem.Route{"POST /shops/:shop/audit/:id": {Skip: true}})
	e := echo.New()
	e.Use(idemecho.Middleware(g))
	e.POST("/orders/:id", handler)
	shops := e.Group("/shops/:shop")
	shops.POST("/orders/:id", handler)
	shops.POST("/audit/:id", handler)
	for _, base := range []string{"/orders/", "/shops/s1/orders/"} {
		runs.Store(0)
		k := key + strings.ReplaceAll(base, "/", "-")
		first, again := post(e, base+"1", k, `{"qty":1}`), post(e, base+"1", k, `{"qty":1}`)
		if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() || runs.Load() != 1 {
			t.Fatalf("%s: %d %s then %d %s, runs %d; want one run and its replay", base, first.Code, first.Body, again.Code, again.Body, runs.Load())
		}
		if other := post(e, base+"2", k, `{"qty":1}`); other.Code != 409 || runs.Load() != 1 {
			t.Fatalf("%s: another order under the same key: %d %s", base, other.Code, other.Body)
		}
	}
	if other := post(e, "/shops/s2/orders/1", key+"-shops-s1-orders-", `{"qty":1}`); other.Code != 409 {
		t.Fatalf("another shop under the same key: %d %s", other.Code, other.Body)
	}
	if nf := post(e, "/nowhere", key+"nf", `{}`); nf.Code != 404 {
		t.Fatalf("no route: %d %s", nf.Code, nf.Body)
	}
	runs.Store(0)
	post(e, "/shops/s1/audit/1", key+"audit", `{}`)
	post(e, "/shops/s1/audit/1", key+"audit", `{}`)
	if runs.Load() != 2 {
		t.Fatalf("the route skipped by its full path ran %d times, want 2", runs.Load())
	}
	runs.Store(0)
	fail = true
	if r1 := post(e, "/orders/9", key+"busy", `{}`); r1.Code != 503 || !strings.Contains(r1.Body.String(), "busy") {
		t.Fatalf("handler's error: %d %s", r1.Code, r1.Body)
	}
	fail = false
	if r2 := post(e, "/orders/9", key+"busy", `{}`); r2.Code != 201 || runs.Load() != 2 {
		t.Fatalf("the retry after a 503: %d %s runs %d; want it run again", r2.Code, r2.Body, runs.Load())
	}
}

func TestMiddlewareNeedsTheGuard(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "e.Use(idemecho.Middleware(guard))") {
			t.Fatalf("panic %v; want one naming the wiring", p)
		}
	}()
	idemecho.Middleware(nil)
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
		rec := post(e, path, "example-key-000000000000000001", `{"qty":1}`)
		fmt.Println(path, rec.Code, rec.Body.String())
	}
	fmt.Println("runs:", runs)
	// Output:
	// /orders/7 201 {"order":"7"}
	// /orders/7 201 {"order":"7"}
	// /orders/8 409 {"error":"idempotency_key_mismatch","message":"The Idempotency-Key has already been used with a different request payload."}
	// runs: 1
}
