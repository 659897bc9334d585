package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// A Lambda authorizer's context may carry the tenant as a JSON number
// (HTTP API keeps its type); the Lambda runtime decodes it into a double,
// which holds an integer exactly only below 2^53. Two tenants whose ids
// differ beyond that (9007199254740993 and 9007199254740992, adjacent
// snowflake ids) decoded to one double and shared one scope: the second
// tenant was answered the first one's response. A number the double may
// not hold exactly (an integer of 2^53 or more, a fraction) is no tenant:
// 401, nothing recorded; a smaller integer is still its decimal.
func TestNumericTenantBeyondADoubleNeverSharesAnAnswer(t *testing.T) {
	event := func(tenant string) events.APIGatewayV2HTTPRequest {
		var ev events.APIGatewayV2HTTPRequest
		raw := `{"routeKey":"POST /orders","rawPath":"/orders","body":"{\"item\":\"book\"}",
			"headers":{"content-type":"application/json","idempotency-key":"k_0123456789abcdefghijkl"},
			"requestContext":{"http":{"method":"POST"},"authorizer":{"lambda":{"tenantId":` + tenant + `}}}}`
		if err := json.Unmarshal([]byte(raw), &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for _, c := range []struct {
		name, first, second string
		status              int // of each; 201 for both: two records
	}{
		{"beyond 2^53", "9007199254740993", "9007199254740992", 401},
		{"snowflake ids", "1234567890123456789", "1234567890123456790", 401},
		{"fractions", "0.1", "0.10000000000000000001", 401},
		{"safe integers", "42", "43", 201},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := memstore.New()
			g, err := idem.New(idem.Config{Store: store, Tenant: idem.AuthorizerKey("tenantId"), Wait: -1})
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			h := g.HTTPAPI(func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				calls++
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"order":"` + strconv.Itoa(calls) + `"}`}, nil
			})
			a, _ := h(context.Background(), event(c.first))
			b, _ := h(context.Background(), event(c.second))
			if a.StatusCode != c.status || b.StatusCode != c.status {
				t.Fatalf("statuses %d, %d (bodies %s, %s), want %d each", a.StatusCode, b.StatusCode, a.Body, b.Body, c.status)
			}
			if b.Headers[idem.HeaderOpenWOPReplay] != "" || (c.status == 201 && (calls != 2 || a.Body == b.Body)) {
				t.Fatalf("the second tenant got the first one's answer: %q after %q (calls %d)", b.Body, a.Body, calls)
			}
			if c.status == 401 && (calls != 0 || store.Len() != 0) {
				t.Fatalf("an ambiguous tenant ran the handler %d times, %d records", calls, store.Len())
			}
		})
	}
}
