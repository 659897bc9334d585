package idem_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A guard without a tenant source would answer every keyed request
// 401 unauthenticated; New refuses it instead, naming the options.
func TestTenantSourceIsRequired(t *testing.T) {
	_, err := idem.New(idem.Config{Store: memstore.New()})
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"Tenant is required", `idem.AuthorizerKey("tenantId")`, "idem.JWTClaim", "idem.IAMPrincipal()", "idem.SingleTenant", "HTTPTenant"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("")}); err == nil || !strings.Contains(err.Error(), "SingleTenant needs a non-empty tenant") {
		t.Fatalf("empty single tenant: %v", err)
	}
	// HTTPTenant alone is a choice for a net/http-only guard.
	g, err := idem.New(idem.Config{Store: memstore.New(), HTTPTenant: func(*http.Request) (string, bool) { return "t", true }})
	if err != nil {
		t.Fatal(err)
	}
	// ... but then the API Gateway adapters have no tenant: wrapping one
	// fails at start-up, not with a 401 on every request.
	mustPanic(t, "HTTPAPI without Tenant", func() {
		g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, nil
		})
	})
	mustPanic(t, "REST without Tenant", func() {
		g.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return events.APIGatewayProxyResponse{}, nil
		})
	})
	g2, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId")})
	if err != nil {
		t.Fatal(err)
	}
	mustPanic(t, "Middleware without HTTPTenant", func() { g2.Middleware(http.NotFoundHandler()) })
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	f()
}

// SingleTenant serves functions without an authorizer: every adapter puts
// every request in the one tenant, so keys deduplicate instead of 401.
func TestSingleTenant(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("orders-service"), Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		runs++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"ok":true}`}, nil
	})
	ev := events.APIGatewayV2HTTPRequest{RouteKey: "POST /orders", Body: `{"a":1}`,
		Headers:        map[string]string{"idempotency-key": "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6c", "content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}}}
	for i := range 2 {
		r, _ := h(context.Background(), ev)
		if r.StatusCode != 201 || (i == 1) != (r.Headers["Openwop-Idempotent-Replay"] == "true") {
			t.Fatalf("attempt %d: %d %v %s", i, r.StatusCode, r.Headers, r.Body)
		}
	}
	rest := g.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs++
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: `{}`}, nil
	})
	r1, _ := rest(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/x", Headers: map[string]string{"Idempotency-Key": "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6d"}})
	if r1.StatusCode != 201 {
		t.Fatalf("REST: %d %s", r1.StatusCode, r1.Body)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /n", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { runs++; w.WriteHeader(201) })))
	for i := range 2 {
		req := httptest.NewRequest("POST", "/n", strings.NewReader("x"))
		req.Header.Set("Idempotency-Key", "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6e")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != 201 || (i == 1) != (rec.Header().Get("Openwop-Idempotent-Replay") == "true") {
			t.Fatalf("net/http attempt %d: %d %v", i, rec.Code, rec.Header())
		}
	}
	if runs != 3 {
		t.Fatalf("handler runs = %d, want 3", runs)
	}
}
