package idem_test

import (
	"context"
	"encoding/json"
	"github.com/idemkit/idemkit/idem/canon"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/jcs"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/.

func FuzzParseKey(f *testing.F) {
	f.Add(testKey)
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []idem.KeyPolicy{idem.KeyOpenWOP, erp.Key, commerce.Key} {
			key, present, err := idem.ParseKey([]string{s}, p)
			if !present {
				t.Fatalf("one value reported absent")
			}
			if err != nil {
				if strings.Contains(err.Error(), s) && len(s) > 3 {
					t.Fatalf("error text contains the key")
				}
				continue
			}
			n := len(s)
			if p.Runes {
				n = utf8.RuneCountInString(s)
			}
			bad := ", \t\r\n"
			if p.Allow(',') {
				bad = "\t\r\n" // a comma and inner spaces are part of the key
			} else if strings.Contains(s, " ") {
				t.Fatalf("policy %s accepted a space in %q", p.Name, s)
			}
			if key != s || n < p.MinLen || n > p.MaxLen || strings.ContainsAny(s, bad) || s != strings.TrimSpace(s) ||
				p.Runes && !utf8.ValidString(s) {
				t.Fatalf("policy %s accepted %q", p.Name, s)
			}
			if _, _, err := idem.ParseKey([]string{s, s}, p); err == nil {
				t.Fatalf("two headers accepted")
			}
		}
	})
}

func FuzzDigest(f *testing.F) {
	f.Add([]byte(`{"a":1}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := idem.DigestJSON(body, nil)
		if err != nil {
			return
		}
		form, err := jcs.Canonicalize(body)
		if err != nil {
			t.Fatalf("digest accepted what JCS rejects: %v", err)
		}
		d2, err := idem.DigestJSON(form, nil)
		if err != nil || d2 != d {
			t.Fatalf("canonical form hashes differently: %s vs %s (%v)", d, d2, err)
		}
		n := &canon.Normalizer{Name: "fuzz", Exclude: []string{"a", "/b/c", "/d/0/e"}}
		if _, err := idem.DigestJSON(body, n); err != nil {
			t.Fatalf("normaliser failed on valid JSON: %v", err)
		}
	})
}

// checkClientAnswer: a client mistake is a 4xx envelope, never a 500.
func checkClientAnswer(t *testing.T, status int, body string, headers map[string]string) {
	t.Helper()
	if status >= 500 {
		t.Fatalf("status %d for client input: %s", status, body)
	}
	if status >= 400 {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || e.Message == "" {
			t.Fatalf("status %d without an envelope: %q", status, body)
		}
	}
}

func FuzzHTTPAPIEvent(f *testing.F) {
	f.Add([]byte(`{"routeKey":"POST /runs","headers":{"idempotency-key":"k_0123456789abcdefghijkl"},"body":"{}","requestContext":{"http":{"method":"POST"},"authorizer":{"lambda":{"tenantId":"t"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev events.APIGatewayV2HTTPRequest
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		if ev.RouteKey == "" { // API Gateway always routes
			ev.RouteKey = "POST /runs"
		}
		e := newEnv(t, func(c *idem.Config) { c.Unauthenticated = idem.AnonymousTenant })
		h := &handler{status: 201}
		for i := 0; i < 2; i++ {
			r := e.call(h, ev)
			checkClientAnswer(t, r.StatusCode, r.Body, r.Headers)
		}
	})
}

func FuzzRESTEvent(f *testing.F) {
	f.Add([]byte(`{"resource":"/runs","httpMethod":"POST","multiValueHeaders":{"Idempotency-Key":["k_0123456789abcdefghijkl"]},"body":"{}","requestContext":{"authorizer":{"tenantId":"t"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev events.APIGatewayProxyRequest
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		if ev.Resource == "" {
			ev.Resource = "/runs"
		}
		e := newEnv(t, nil)
		w := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return events.APIGatewayProxyResponse{StatusCode: 200, Body: "ok"}, nil
		})
		for i := 0; i < 2; i++ {
			r, err := w(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			checkClientAnswer(t, r.StatusCode, r.Body, r.Headers)
		}
	})
}
