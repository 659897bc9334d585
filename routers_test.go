package idemkit_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// routerAdapters are the router adapters, each a module of its own under
// idem/router (so a program using one router links no other), with the
// wiring a user writes in a Lambda function behind an HTTP API: the
// router, the adapter's middleware, a route with a path parameter, and
// aws-lambda-go-api-proxy's adapter for that router.
var routerAdapters = []struct {
	name, dir string
	// imports are the router's and its proxy adapter's import lines.
	imports string
	// router is the body of router(guard *idem.Guard) http.Handler
	// (or of the router's own type).
	router string
	// proxy is the Lambda handler built from the router r.
	proxy string
}{
	{
		name: "chi", dir: "idem/router/idemchi",
		imports: `chiadapter "github.com/awslabs/aws-lambda-go-api-proxy/chi"
	"github.com/go-chi/chi/v5"
	"github.com/idemkit/idemkit/idem/router/idemchi"`,
		router: `func router(guard *idem.Guard) *chi.Mux {
	r := chi.NewRouter()
	r.Use(idemchi.Middleware(guard, r))
	r.Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		created(w, chi.URLParam(r, "id"))
	})
	return r
}`,
		proxy: `chiadapter.NewV2(r).ProxyWithContextV2`,
	},
	{
		name: "gorilla/mux", dir: "idem/router/idemmux",
		imports: `"github.com/awslabs/aws-lambda-go-api-proxy/gorillamux"
	"github.com/gorilla/mux"
	"github.com/idemkit/idemkit/idem/router/idemmux"`,
		router: `func router(guard *idem.Guard) *mux.Router {
	r := mux.NewRouter()
	r.Use(idemmux.Middleware(guard, r))
	r.HandleFunc("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		created(w, mux.Vars(r)["id"])
	}).Methods("POST")
	return r
}`,
		proxy: `gorillamux.NewV2(r).ProxyWithContext`,
	},
	{
		name: "gin", dir: "idem/router/idemgin",
		imports: `ginadapter "github.com/awslabs/aws-lambda-go-api-proxy/gin"
	"github.com/gin-gonic/gin"
	"github.com/idemkit/idemkit/idem/router/idemgin"`,
		router: `func router(guard *idem.Guard) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(idemgin.Middleware(guard))
	r.POST("/orders/:id", func(c *gin.Context) { created(c.Writer, c.Param("id")) })
	return r
}`,
		proxy: `ginadapter.NewV2(r).ProxyWithContext`,
	},
	{
		name: "echo", dir: "idem/router/idemecho",
		imports: `echoadapter "github.com/awslabs/aws-lambda-go-api-proxy/echo"
	"github.com/labstack/echo/v4"
	"github.com/idemkit/idemkit/idem/router/idemecho"`,
		router: `func router(guard *idem.Guard) *echo.Echo {
	e := echo.New()
	e.Use(idemecho.Middleware(guard))
	e.POST("/orders/:id", func(c echo.Context) error {
		created(c.Response(), c.Param("id"))
		return nil
	})
	return e
}`,
		proxy: `echoadapter.NewV2(r).ProxyWithContext`,
	},
}

// routerMain is a Lambda function's main.go behind an HTTP API: the
// idempotency table from the environment, one tenant, the router.
const routerMain = `package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemenv"
	IMPORTS
)

var runs atomic.Int32

// created is the route's work: it runs once per order and key.
func created(w http.ResponseWriter, id string) {
	n := runs.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, "{\"order\":%q,\"run\":%d}", id, n)
}

ROUTER

// lambdaHandler is what Lambda invokes: the router behind the HTTP API.
func lambdaHandler(g *idem.Guard) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r := router(g)
	return PROXY
}

func guard(store idem.Store, env idemenv.Env) (*idem.Guard, error) {
	cfg := idem.Config{Store: store, Tenant: idem.SingleTenant("orders")}
	env.Apply(&cfg)
	return idem.New(cfg)
}

func main() {
	env, err := idemenv.Load(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	awsCfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	store, err := dynamostore.New(dynamostore.Config{Client: dynamodb.NewFromConfig(awsCfg), Table: env.Table})
	if err != nil {
		log.Fatal(err)
	}
	g, err := guard(store, env)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(lambdaHandler(g))
}
`

// routerMainTest sends HTTP API events through the function's proxy
// handler, as Lambda does.
const routerMainTest = `package main

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/idem/memstore"
)

func event(id, key string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /orders/{id}", RawPath: "/orders/" + id,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": key},
		Body:    "{\"qty\":1}",
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/orders/" + id},
		},
	}
}

func TestRoutedOnce(t *testing.T) {
	g, err := guard(memstore.New(), idemenv.Env{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	h := lambdaHandler(g)
	const key = "fresh-module-key-0000000000000001"
	first, err := h(context.Background(), event("7", key))
	if err != nil || first.StatusCode != 201 || !strings.Contains(first.Body, "\"order\":\"7\"") {
		t.Fatalf("first: %d %s %v", first.StatusCode, first.Body, err)
	}
	again, err := h(context.Background(), event("7", key))
	if err != nil || again.StatusCode != 201 || again.Body != first.Body || runs.Load() != 1 {
		t.Fatalf("the same request again: %d %s %v, runs %d; want the replay", again.StatusCode, again.Body, err, runs.Load())
	}
	if strings.ToLower(again.Headers["Openwop-Idempotent-Replay"]+again.Headers["openwop-idempotent-replay"]) != "true" {
		t.Fatalf("the replay is not marked: %v", again.Headers)
	}
	other, err := h(context.Background(), event("8", key))
	if err != nil || other.StatusCode != 409 || !strings.Contains(other.Body, "idempotency_key_mismatch") || runs.Load() != 1 {
		t.Fatalf("another order under the same key: %d %s %v; want 409 (the path parameter is in the fingerprint)", other.StatusCode, other.Body, err)
	}
	t.Logf("ran once; replayed; another order refused")
}
`

// TestRouterAdaptersInFreshModules: for chi, gorilla/mux, gin and echo,
// the adapter module's own tests and vet pass, and a Lambda function
// written in a fresh module outside the repository with that router's
// usual wiring (the router, r.Use of the adapter's middleware, a route with
// a path parameter, aws-lambda-go-api-proxy's adapter for the router, the
// idempotency table from the environment) builds and, driven with HTTP API
// events, runs a request once, replays it, and refuses the same key on
// another order (the pattern's path parameter is in the fingerprint). The
// third-party modules come through the module proxy.
func TestRouterAdaptersInFreshModules(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds four modules with their routers")
	}
	root := shared.ModuleRoot()
	for _, a := range routerAdapters {
		t.Run(a.name, func(t *testing.T) {
			dir := filepath.Join(root, a.dir)
			testutil.GoIn(t, dir, true, "vet", "./...")
			testutil.GoIn(t, dir, true, "test", "-race", "-count=1", "./...")
			main := strings.NewReplacer("IMPORTS", a.imports, "ROUTER", a.router, "PROXY", a.proxy).Replace(routerMain)
			mod := testutil.FreshModule(t, testutil.Module{
				Path: "example.com/orders", Online: true,
				Files: map[string]string{"main.go": main, "main_test.go": routerMainTest},
				Replace: map[string]string{
					"github.com/idemkit/idemkit":          root,
					"github.com/idemkit/idemkit/" + a.dir: dir,
				},
			})
			testutil.GoIn(t, mod, true, "vet", "./...")
			testutil.GoIn(t, mod, true, "build", "-o", filepath.Join(t.TempDir(), "bootstrap"), ".")
			if out := testutil.GoIn(t, mod, true, "test", "-count=1", "-run", "TestRoutedOnce", "-v", "."); !strings.Contains(out, "ran once; replayed; another order refused") {
				t.Fatalf("the fresh module's test did not run:\n%s\n--- main.go:\n%s", out, main)
			}
		})
	}
}
