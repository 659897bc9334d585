package idemgin_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/router/idemgin"
)

func init() { gin.SetMode(gin.TestMode) }

const key = "gin-key-00000000000000000000001"

// TestGuardsEachRoute: given to the engine's Use, the middleware guards
// every route by gin's full path, a group's included: the same key and
// body on the same order is a replay (the handler and the middlewares
// after the guard run once), on another order a 409 mismatch; a handler's
// 5xx is not recorded (the retry runs again); a path no route serves is
// gin's 404; Config.Routes is keyed by method and full path.
func TestGuardsEachRoute(t *testing.T) {
	var runs, after atomic.Int32
	fail := false
	handler := func(c *gin.Context) {
		n := runs.Add(1)
		if fail {
			c.JSON(503, gin.H{"error": "busy"})
			return
		}
		c.JSON(201, gin.H{"order": c.Param("id"), "run": n})
	}
	g := routertest.Guard(t, map[string]idem.Route{"POST /shops/:shop/audit/:id": {Skip: true}})
	r := gin.New()
	r.Use(idemgin.Middleware(g), func(c *gin.Context) { after.Add(1); c.Next() })
	r.POST("/orders/:id", handler)
	shops := r.Group("/shops/:shop")
	shops.POST("/orders/:id", handler)
	shops.POST("/audit/:id", handler)
	routes := routertest.Routes{Handler: r, Key: key, Runs: &runs,
		Replayed: func(t *testing.T, base string, first *httptest.ResponseRecorder) {
			if after.Load() != 1 {
				t.Fatalf("%s: the middleware after the guard ran %d times for a run and its replay, want once", base, after.Load())
			}
			after.Store(0)
			if !strings.Contains(first.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("%s: Content-Type %q", base, first.Header().Get("Content-Type"))
			}
		}}
	routertest.GuardsEachRoute(t, routes)
	routertest.FailureIsNotRecorded(t, routes, &fail)
}

func TestMiddlewareNeedsTheGuard(t *testing.T) {
	routertest.PanicsNamingTheWiring(t, "r.Use(idemgin.Middleware(guard))", func() { idemgin.Middleware(nil) })
}

// A gin engine under idempotency: the second request with the same key
// and body is a replay; the same key on another order is refused.
func ExampleMiddleware() {
	gin.SetMode(gin.TestMode)
	guard, _ := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	r := gin.New()
	r.Use(idemgin.Middleware(guard))
	runs := 0
	r.POST("/orders/:id", func(c *gin.Context) {
		runs++
		c.JSON(http.StatusCreated, gin.H{"order": c.Param("id")})
	})
	for _, path := range []string{"/orders/7", "/orders/7", "/orders/8"} {
		rec := routertest.Post(r, path, "example-key-000000000000000001", `{"qty":1}`)
		fmt.Println(path, rec.Code, rec.Body.String())
	}
	fmt.Println("runs:", runs)
	// Output:
	// /orders/7 201 {"order":"7"}
	// /orders/7 201 {"order":"7"}
	// /orders/8 409 {"error":"idempotency_key_mismatch","message":"The Idempotency-Key has already been used with a different request payload."}
	// runs: 1
}

// TestPanickingHandlerLeavesGinItsWriter: a handler that panics is
// answered 500 by the Guard (the record released); the middlewares before
// the guard then see gin's own writer again, with the status that went
// out, never the buffered writer the handler panicked on.
func TestPanickingHandlerLeavesGinItsWriter(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := gin.New()
	var seen int
	r.Use(func(c *gin.Context) { c.Next(); seen = c.Writer.Status() }, idemgin.Middleware(g))
	r.POST("/orders/:id", func(c *gin.Context) {
		c.Status(201)
		panic("boom")
	})
	rec := routertest.Post(r, "/orders/1", key+"panic", `{}`)
	if rec.Code != 500 || seen != 500 {
		t.Fatalf("answered %d, the middleware before the guard saw %d", rec.Code, seen)
	}
}

// TestHandlerContextIsTheClaims: the handlers' context is
// c.Request.Context(), the claim's (idem.FromContext and idem.Transact
// read it; it ends when the lease is lost); gin's Context is that
// context only with the engine's ContextWithFallback set, as the
// package documentation says.
func TestHandlerContextIsTheClaims(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		g := routertest.Guard(t, nil)
		r := gin.New()
		r.ContextWithFallback = fallback
		r.Use(idemgin.Middleware(g))
		var viaGin, viaRequest bool
		r.POST("/orders", func(c *gin.Context) {
			_, viaGin = idem.FromContext(c)
			_, viaRequest = idem.FromContext(c.Request.Context())
			c.Status(201)
		})
		routertest.Post(r, "/orders", fmt.Sprintf("%sctx%v", key, fallback), `{}`)
		if !viaRequest || viaGin != fallback {
			t.Fatalf("ContextWithFallback %v: the claim via c.Request.Context() %v, via gin's Context %v", fallback, viaRequest, viaGin)
		}
	}
}

// TestEnginesBehindAHostSwitchNeverShareAnAnswer: gin routes by method and
// path only, so serving two hosts (or two ports) takes an engine for each,
// behind a host switch of the program's own (gin's answer for several
// sites), the same Guard on both. Their routes of one path are two
// routes: the same key and body sent to the second host is never the
// first one's answer replayed (the request's host is in the fingerprint:
// a 409 mismatch), and each host's own retry is still its replay.
func TestEnginesBehindAHostSwitchNeverShareAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	runs := map[string]int{}
	engines := map[string]*gin.Engine{}
	for _, host := range []string{"a.example.com", "b.example.com:8081"} {
		e := gin.New()
		e.Use(idemgin.Middleware(g))
		e.POST("/orders", func(c *gin.Context) {
			runs[host]++
			c.JSON(201, gin.H{"host": host})
		})
		engines[host] = e
	}
	hostSwitch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e, ok := engines[strings.ToLower(r.Host)]; ok {
			e.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
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
		if a := send("a.example.com"); a.Code != 201 || a.Body.String() != `{"host":"a.example.com"}` || runs["a.example.com"] != 1 {
			t.Fatalf("a: %d %s (runs %v)", a.Code, a.Body, runs)
		}
	}
	if b := send("b.example.com:8081"); b.Code != 409 || runs["b.example.com:8081"] != 0 {
		t.Fatalf("b under a's key: %d %s (runs %v), want 409 and b not run", b.Code, b.Body, runs)
	}
}

// TestOneParamNameAtTwoLevelsNeverSharesAnAnswer: gin lets a group name
// a path parameter as a route in it does ("/shops/:id" around
// "/orders/:id"); both values route the request, so both are in the
// fingerprint: one key and body on another shop's order 1 is a 409
// mismatch, never the first shop's answer replayed.
func TestOneParamNameAtTwoLevelsNeverSharesAnAnswer(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := gin.New()
	r.Use(idemgin.Middleware(g))
	runs := 0
	r.Group("/shops/:id").POST("/orders/:id", func(c *gin.Context) {
		runs++
		c.String(201, `{"path":%q}`, c.Request.URL.Path)
	})
	routertest.OneParamNameAtTwoLevels(t, r, key+"two-levels", &runs)
}

// TestStreamingHandlerAnswersItsStatus: a gin handler that sets its
// status, flushes (gin's Flush commits the status it was given first) and
// streams its body with Context.Stream gets, behind the guard, the
// answer gin gives it without: its status and whole body, replayed as
// such; it runs once.
func TestStreamingHandlerAnswersItsStatus(t *testing.T) {
	var runs atomic.Int32
	handler := func(c *gin.Context) {
		runs.Add(1)
		c.Status(201)
		c.Writer.Flush()
		n := 0
		c.Stream(func(w io.Writer) bool {
			n++
			_, _ = fmt.Fprintf(w, "part %d;", n)
			return n < 3
		})
	}
	post := func(srv *httptest.Server) (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/orders/7", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	plain := gin.New()
	plain.POST("/orders/:id", handler)
	plainSrv := httptest.NewServer(plain)
	defer plainSrv.Close()
	wantCode, wantBody := post(plainSrv)
	if wantCode != 201 || wantBody != "part 1;part 2;part 3;" {
		t.Fatalf("without the guard: %d %q", wantCode, wantBody)
	}
	runs.Store(0)
	r := gin.New()
	r.Use(idemgin.Middleware(routertest.Guard(t, nil)))
	r.POST("/orders/:id", handler)
	srv := httptest.NewServer(r) // one host: a retry goes where its first try went
	defer srv.Close()
	for i := range 2 {
		if code, body := post(srv); code != wantCode || body != wantBody {
			t.Fatalf("answer %d: %d %q, want %d %q", i, code, body, wantCode, wantBody)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestResponseControllerDeadlinesReachTheConnection: a gin handler that
// extends its write deadline through http.ResponseController (which
// reaches net/http's writer through gin's Unwrap) got ErrNotSupported
// behind the guard, whose writer had no Unwrap; it sets the deadline of
// the connection the answer goes out on, as without the guard.
func TestResponseControllerDeadlinesReachTheConnection(t *testing.T) {
	var runs atomic.Int32
	r := gin.New()
	r.Use(idemgin.Middleware(routertest.Guard(t, nil)))
	r.POST("/orders/:id", func(c *gin.Context) {
		runs.Add(1)
		if err := http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(time.Hour)); err != nil {
			c.String(500, "write deadline: %v", err)
			return
		}
		c.String(201, "ok")
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	for i := range 2 {
		req, _ := http.NewRequest("POST", srv.URL+"/orders/7", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 201 || string(b) != "ok" {
			t.Fatalf("answer %d: %d %q", i, resp.StatusCode, b)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the handler ran %d times", n)
	}
}

// TestErrorRenderedBeforeTheGuardIsNotRecorded: a handler that fails with
// c.Error and writes nothing leaves its answer to an error-rendering
// middleware given to Use before the guard, as gin's docs show; that
// answer goes out as the middleware renders it, and the key's retry runs
// again (RED_TEAM 454).
func TestErrorRenderedBeforeTheGuardIsNotRecorded(t *testing.T) {
	var runs atomic.Int32
	g := routertest.Guard(t, nil)
	r := gin.New()
	r.Use(func(c *gin.Context) {
		c.Next()
		if len(c.Errors) > 0 {
			c.JSON(http.StatusServiceUnavailable, gin.H{"error": "unavailable"})
		}
	}, idemgin.Middleware(g))
	r.POST("/orders/:id", func(c *gin.Context) {
		if runs.Add(1) == 1 {
			_ = c.Error(errors.New("db down"))
			return
		}
		c.JSON(http.StatusCreated, gin.H{"ok": true})
	})
	first := routertest.Post(r, "/orders/1", key, `{"a":1}`)
	if first.Code != http.StatusServiceUnavailable || first.Body.String() != `{"error":"unavailable"}` ||
		!strings.HasPrefix(first.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("failed attempt answered %d %v %q, want the error middleware's 503 JSON", first.Code, first.Header(), first.Body)
	}
	retry := routertest.Post(r, "/orders/1", key, `{"a":1}`)
	if retry.Code != http.StatusCreated || runs.Load() != 2 {
		t.Fatalf("retry answered %d %q after %d runs, want 201 from a second run", retry.Code, retry.Body, runs.Load())
	}
	replay := routertest.Post(r, "/orders/1", key, `{"a":1}`)
	if replay.Code != http.StatusCreated || replay.Body.String() != retry.Body.String() || runs.Load() != 2 {
		t.Fatalf("third attempt answered %d %q after %d runs, want the 201 replayed", replay.Code, replay.Body, runs.Load())
	}
	runs.Store(0) // a request without a key, which the Guard passes through, likewise
	if unkeyed := routertest.Post(r, "/orders/1", "", `{"a":1}`); unkeyed.Code != http.StatusServiceUnavailable || unkeyed.Body.String() != `{"error":"unavailable"}` {
		t.Fatalf("failed request without a key answered %d %q, want the error middleware's 503", unkeyed.Code, unkeyed.Body)
	}
}

// TestMiddlewareBeforeTheGuardKeepsItsRequest: a middleware given to Use
// before the guard reads c.Request after c.Next() as it was, not the
// claim's request, whose context is cancelled once the claim ends: a
// write it makes with that context (an audit record) is not refused with
// context.Canceled (RED_TEAM 457).
func TestMiddlewareBeforeTheGuardKeepsItsRequest(t *testing.T) {
	g := routertest.Guard(t, nil)
	r := gin.New()
	var seen []string
	r.Use(func(c *gin.Context) {
		before := c.Request
		c.Next()
		_, claimed := idem.FromContext(c.Request.Context())
		seen = append(seen, fmt.Sprintf("same=%v err=%v claim=%v", c.Request == before, c.Request.Context().Err(), claimed))
	}, idemgin.Middleware(g))
	r.POST("/orders/:id", func(c *gin.Context) { c.JSON(http.StatusCreated, gin.H{}) })
	r.POST("/fail/:id", func(c *gin.Context) { _ = c.Error(errors.New("down")) })
	r.POST("/panic/:id", func(c *gin.Context) { panic("boom") })
	for _, p := range []string{"/orders/1", "/orders/1", "/fail/1", "/panic/1"} {
		routertest.Post(r, p, key+strings.ReplaceAll(p, "/", "-"), `{}`)
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

// TestErrorWithAStatusAndNoErrorMiddlewareKeepsTheStatus: handlers that
// set a status and headers, add an error and write nothing, with no
// middleware rendering c.Errors, answer that status and those headers,
// as gin does, and are not recorded (RED_TEAM 454).
func TestErrorWithAStatusAndNoErrorMiddlewareKeepsTheStatus(t *testing.T) {
	var runs atomic.Int32
	g := routertest.Guard(t, nil)
	r := gin.New()
	r.Use(idemgin.Middleware(g))
	r.POST("/orders/:id", func(c *gin.Context) {
		runs.Add(1)
		c.Header("X-Why", "db")
		c.Status(http.StatusBadRequest)
		_ = c.Error(errors.New("db down"))
	})
	for i := range 2 {
		rec := routertest.Post(r, "/orders/1", key+"status", `{}`)
		if rec.Code != http.StatusBadRequest || rec.Header().Get("X-Why") != "db" || runs.Load() != int32(i+1) {
			t.Fatalf("request %d: %d %v after %d runs, want 400 with X-Why from a run of its own", i+1, rec.Code, rec.Header(), runs.Load())
		}
	}
}
