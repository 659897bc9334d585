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
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// TestCommerceKeyIsAnyStringUpTo255Characters: under the commerce policy a
// key is any string of 1..255 characters (code points), non-ASCII, commas
// and inner spaces included; control characters, invalid UTF-8 and
// surrounding whitespace are refused; a comma never splits a key, and
// repeated headers are refused wherever the adapter sees them (net/http,
// REST), while an HTTP API's comma-joined value is read as one key.
func TestCommerceKeyIsAnyStringUpTo255Characters(t *testing.T) {
	kp := commerce.Policy.Key
	for key, want := range map[string]string{
		"x":                      "",
		"cart:123":               "",
		"корзина 42, клиент ✓":   "",
		strings.Repeat("é", 255): "",
		strings.Repeat("é", 256): idem.ReasonLength,
		"":                       idem.ReasonLength,
		"tab\tinside":            idem.ReasonCharset,
		"nul\x00":                idem.ReasonCharset,
		"del\x7f":                idem.ReasonCharset,
		"c1\u0085x":              idem.ReasonCharset,
		"bad\xffutf8":            idem.ReasonCharset,
		" leading":               idem.ReasonWhitespace,
		"trailing ":              idem.ReasonWhitespace,
		"a,b":                    "",
	} {
		err := kp.Validate(key)
		var ke *idem.KeyError
		got := ""
		if errors.As(err, &ke) {
			got = ke.Reason
		}
		if got != want {
			t.Errorf("%q: reason %q, want %q", key, got, want)
		}
	}

	e := newEnv(t, func(c *idem.Config) {
		c.Policy = commerce.Policy
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
		c.HTTPCredential = func(r *http.Request, name string) string { return "v-" + name }
	})
	h := &handler{}
	// HTTP API: the comma-joined value is one key, never split.
	if r := e.call(h, commerceEvent("POST", "POST /orders", "a,b", `{}`)); r.StatusCode != 201 {
		t.Fatalf("comma key: %d %s", r.StatusCode, r.Body)
	}
	if r := e.call(h, commerceEvent("POST", "POST /orders", "a", `{}`)); r.StatusCode != 201 || r.Headers["Idempotent-Replayed"] != "" || h.Calls() != 2 {
		t.Fatalf(`"a" is not the key "a,b": %+v`, r)
	}
	// REST: multiValueHeaders shows two headers: refused.
	rest := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 201}, nil
	})
	rr, _ := rest(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/orders",
		MultiValueHeaders: map[string][]string{"Idempotency-Key": {"a", "b"}},
		RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{
			"tenantId": testTenant, "namespace": "ns-1", "worker": "checkout"}}})
	if code, d := envelope(t, rr.Body); rr.StatusCode != 400 || code != "idempotency_key_invalid" || d["reason"] != idem.ReasonMultiple {
		t.Fatalf("REST repeated header: %d %s", rr.StatusCode, rr.Body)
	}
	// net/http: r.Header keeps every value: two headers refused, one
	// header with a comma is one key.
	mw := e.guard.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) }))
	req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`))
	req.Header["Idempotency-Key"] = []string{"a", "b"}
	w := httptest.NewRecorder()
	mw.ServeHTTP(w, req)
	if w.Code != 400 || !strings.Contains(w.Body.String(), idem.ReasonMultiple) {
		t.Fatalf("net/http repeated header: %d %s", w.Code, w.Body)
	}
	req = httptest.NewRequest("POST", "/orders", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", "a,b")
	w = httptest.NewRecorder()
	mw.ServeHTTP(w, req)
	if w.Code != 201 {
		t.Fatalf("net/http comma key: %d %s", w.Code, w.Body)
	}
}
