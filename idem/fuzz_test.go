package idem_test

import (
	"context"
	"encoding/json"
	"github.com/idemkit/idemkit/idem/canon"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/jcs"
	"github.com/idemkit/idemkit/internal/shared"
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

// FuzzProxyEventShapes builds REST API (payload 1.0) events, the shape an
// Application Load Balancer's Lambda target also sends, from fuzzed parts:
// a single-valued header and a multi-valued one whose names may spell
// Idempotency-Key or Content-Type in any case and whose values may
// disagree, single and multi-valued query parameters present together,
// a body with isBase64Encoded (valid base64 or not), and an authorizer
// tenant or none (an ALB sends none). Whatever arrives, each answer is a
// client answer (checkClientAnswer: never 5xx, every 4xx an envelope),
// and after a 4xx the same keys sent with a well-formed request are never
// refused as in flight: a refused request leaves no claim behind.
func FuzzProxyEventShapes(f *testing.F) {
	reg := registryCodes(f)
	f.Add("POST", "/runs", "Idempotency-Key", testKey, "Idempotency-Key", testKey, "", "a", "1", "1", `{}`, false, true)
	f.Add("POST", "/runs", "Idempotency-Key", testKey, "idempotency-key", "k_abcdefghijklmnopqrstuv", "", "a", "1", "2", `{}`, false, true)
	f.Add("POST", "/runs", "IDEMPOTENCY-KEY", testKey, "iDeMpOtEnCy-kEy", testKey, testKey, "a", "", "x", `{}`, false, false)
	f.Add("POST", "/runs", "idempotency-key", testKey, "Content-Type", "application/json", "text/plain", "", "", "", "eyJhIjoxfQ==", true, true)
	f.Add("POST", "/runs", "idempotency-key", testKey, "content-type", "application/json", "", "", "", "", "!!not base64", true, true)
	f.Add("POST", "/runs", "idempotency-key", testKey, "content-type", "application/json", "", "", "", "", "eyJhIjoxfQ", true, false)
	f.Add("POST", "/runs", "idempotency-key", "", "idempotency-key", "", "", "", "", "", "", false, true)
	f.Add("POST", "/runs", "idempotency-key", strings.Repeat("k", 4096), "x-forwarded-for", "10.0.0.1", "", "q", strings.Repeat("v", 4096), "", strings.Repeat("{", 2048), false, true)
	f.Add("GET", "/runs", "Idempotency-Key", testKey, "Accept", "application/json", "text/html", "", "", "", "", false, false)
	f.Add("", "", "Idempotency-Key", testKey+","+testKey, "", "", "", "", "", "", `{}`, false, true)
	f.Add("POST", "/runs", "Content-Encoding", "gzip", "Idempotency-Key", testKey, "", "", "", "", "H4sIAAAAAAAA/w==", true, true)
	f.Fuzz(func(t *testing.T, method, resource, name1, value1, multiName, multi1, multi2, qName, qSingle, qMulti, body string, b64, authorizer bool) {
		if resource == "" { // API Gateway always routes; an ALB event has no resource, and Guard.REST answers it 500 server_configuration_error
			resource = "/runs"
		}
		ev := events.APIGatewayProxyRequest{Resource: resource, Path: resource, HTTPMethod: method, Body: body, IsBase64Encoded: b64,
			Headers: map[string]string{}, MultiValueHeaders: map[string][]string{}}
		if name1 != "" {
			ev.Headers[name1] = value1
		}
		if multiName != "" {
			ev.MultiValueHeaders[multiName] = []string{multi1}
			if multi2 != "" {
				ev.MultiValueHeaders[multiName] = append(ev.MultiValueHeaders[multiName], multi2)
			}
		}
		if qName != "" {
			ev.QueryStringParameters = map[string]string{qName: qSingle}
			if qMulti != "" {
				ev.MultiValueQueryStringParameters = map[string][]string{qName: {qMulti}}
			}
		}
		if authorizer {
			ev.RequestContext.Authorizer = map[string]any{"tenantId": "t"}
		}
		e := newEnv(t, func(c *idem.Config) { c.Unauthenticated = idem.AnonymousTenant })
		w := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return events.APIGatewayProxyResponse{StatusCode: 201, Body: `{"ok":true}`, Headers: map[string]string{"Content-Type": "application/json"}}, nil
		})
		status := 0
		for i := 0; i < 2; i++ {
			r, err := w(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			checkClientAnswer(t, r.StatusCode, r.Body, r.Headers)
			checkRegistered(t, reg, r.StatusCode, r.Body)
			status = r.StatusCode
		}
		if status < 400 || status == http.StatusConflict {
			return
		}
		for _, k := range []string{value1, multi1, multi2} {
			if k == "" {
				continue
			}
			fixed := events.APIGatewayProxyRequest{Resource: "/runs", Path: "/runs", HTTPMethod: "POST", Body: `{}`,
				Headers: map[string]string{"Idempotency-Key": k, "Content-Type": "application/json"}}
			fixed.RequestContext.Authorizer = ev.RequestContext.Authorizer
			r, err := w(context.Background(), fixed)
			if err != nil {
				t.Fatal(err)
			}
			if r.StatusCode >= 500 || strings.Contains(r.Body, "idempotency_in_flight") {
				t.Fatalf("after %d, the corrected request with its key is %d %s", status, r.StatusCode, r.Body)
			}
		}
	})
}

// registryCodes reads the OpenWOP error registry's codes once per target.
func registryCodes(tb testing.TB) map[string]bool {
	tb.Helper()
	raw, err := os.ReadFile(shared.Path(tb, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var doc struct {
		Rows []struct {
			Code string `json:"code"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Rows) == 0 {
		tb.Fatalf("errors.json: %v", err)
	}
	m := make(map[string]bool, len(doc.Rows))
	for _, r := range doc.Rows {
		m[r.Code] = true
	}
	return m
}

var vendorCode = regexp.MustCompile(`^idemkit\.[a-z][a-z0-9_]*$`)

// checkRegistered: an error answer is exactly {error, message, details?}
// and its code is the registry's or the vendor idemkit. form.
func checkRegistered(t *testing.T, reg map[string]bool, status int, body string) {
	t.Helper()
	if status < 400 {
		return
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &top); err != nil {
		t.Fatalf("status %d without an envelope: %q", status, body)
	}
	for k := range top {
		if k != "error" && k != "message" && k != "details" {
			t.Fatalf("envelope has extra member %q: %s", k, body)
		}
	}
	var code string
	if json.Unmarshal(top["error"], &code) != nil || !reg[code] && !vendorCode.MatchString(code) {
		t.Fatalf("status %d code %s is neither the registry's nor idemkit.'s: %s", status, top["error"], body)
	}
}
