package idemecho_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

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
