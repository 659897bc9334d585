package idemlambdaurl_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/shared"
)

// registryCodes reads the OpenWOP error registry's codes.
func registryCodes(t testing.TB) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(shared.Path(t, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Rows []struct {
			Code string `json:"code"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || len(f.Rows) == 0 {
		t.Fatalf("errors.json: %v", err)
	}
	m := make(map[string]bool, len(f.Rows))
	for _, r := range f.Rows {
		m[r.Code] = true
	}
	return m
}

var vendorCode = regexp.MustCompile(`^idemkit\.[a-z][a-z0-9_]*$`)

// FuzzFunctionURLEvent sends function URL events built from fuzzed parts
// (method, raw path and query, two headers whose names may spell
// Idempotency-Key or Content-Type in any case, a body, isBase64Encoded
// with or without valid base64, cookies) through Wrap to a Guard's
// net/http handler. Whatever arrives: the invocation returns no error
// (which a function URL turns into its own 502), the status is never 5xx,
// every non-2xx body is the envelope {error, message, details?} with a
// registry or idemkit. code, and after a 4xx the same key sent with a
// well-formed request is answered by the handler, not refused as in
// flight. The seed corpus is in testdata/fuzz/FuzzFunctionURLEvent.
func FuzzFunctionURLEvent(f *testing.F) {
	reg := registryCodes(f)
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-type", "application/json", `{"a":1}`, false, "")
	f.Add("POST", "/exports", "a=1&a=2", "Idempotency-Key", testKey, "idempotency-key", testKey, `{}`, false, "")
	f.Add("POST", "/exports", "", "IDEMPOTENCY-KEY", testKey, "iDeMpOtEnCy-KeY", "other-key-0123456789abcdef", `{}`, false, "session=a")
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-type", "application/json", "eyJhIjoxfQ==", true, "")
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-type", "application/json", "!!not base64", true, "")
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-type", "application/json", "eyJhIjoxfQ", true, "")
	f.Add("POST", "/exports", "", "idempotency-key", "", "content-type", "", "", false, "")
	f.Add("POST", "/exports", "", "idempotency-key", strings.Repeat("k", 300), "content-type", "application/json", `{}`, false, "")
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-type", "text/plain; charset=utf-8", strings.Repeat("x", 4096), false, "")
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-type", "application/json", `{"a":1,"a":2}`, false, "")
	f.Add("POST", "/exports", "", "idempotency-key", testKey, "content-encoding", "gzip", `{}`, false, "")
	f.Add("GET", "/exports", "", "idempotency-key", testKey, "", "", "", false, "")
	f.Add("POST", "/%zz", "", "idempotency-key", testKey, "", "", `{}`, false, "")
	f.Add("POST", "/exports/../exports", "%%", "idempotency-key", testKey, "", "", `{}`, false, "")
	f.Add("PO ST", "/exports", "", "idempotency-key", testKey, "", "", `{}`, false, "")
	f.Add("POST", "exports", "", "idempotency-key", testKey, "", "", `{}`, false, "")
	f.Add("POST", "/exports", "", "idempotency-key", " "+testKey, "x-amzn-trace-id", "Root=1-5e1b4151-5ac6c58f5a6e7d6b8c9d0e1f", `{}`, false, "a=b; c")

	f.Fuzz(func(t *testing.T, method, rawPath, query, name1, value1, name2, value2, body string, b64 bool, cookie string) {
		guard, err := idem.New(idem.Config{
			Store:  memstore.New(),
			Tenant: idem.SingleTenant("t"),
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Wait:   -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		app := http.NewServeMux()
		app.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { // every path: the Guard's answers are under test, not the mux's 404
			if _, err := io.ReadAll(r.Body); err != nil {
				http.Error(w, `{"error":"validation_error","message":"unreadable body"}`, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"ok":true}`)
		})
		serve := idemlambdaurl.Wrap(guard.Middleware(app))
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "fuzz"})
		send := func(req *events.LambdaFunctionURLRequest) (int, string) {
			t.Helper()
			out, err := serve(ctx, req)
			if err != nil {
				t.Fatalf("%s %q: the invocation failed (a function URL answers 502): %v", req.RequestContext.HTTP.Method, req.RawPath, err)
			}
			b, err := io.ReadAll(out.Body)
			if err != nil {
				t.Fatalf("reading the streamed body: %v", err)
			}
			return out.StatusCode, string(b)
		}
		req := &events.LambdaFunctionURLRequest{RawPath: rawPath, RawQueryString: query, Body: body, IsBase64Encoded: b64,
			Headers: map[string]string{}}
		if cookie != "" {
			req.Cookies = []string{cookie}
		}
		if name1 != "" {
			req.Headers[name1] = value1
		}
		if name2 != "" {
			req.Headers[name2] = value2
		}
		req.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
		req.RequestContext.HTTP.Method = method
		status, text := send(req)
		if status >= 500 {
			t.Fatalf("%s %q: status %d for a client's request: %s", method, rawPath, status, text)
		}
		if status >= 400 { // a 3xx is the mux's redirect to a cleaned path
			var top map[string]json.RawMessage
			if json.Unmarshal([]byte(text), &top) != nil {
				t.Fatalf("%d is not an error envelope: %q", status, text)
			}
			var code, msg string
			if json.Unmarshal(top["error"], &code) != nil || json.Unmarshal(top["message"], &msg) != nil || code == "" || msg == "" {
				t.Fatalf("%d is not an error envelope: %q", status, text)
			}
			for k := range top {
				if k != "error" && k != "message" && k != "details" {
					t.Fatalf("envelope has extra member %q: %s", k, text)
				}
			}
			if !reg[code] && !vendorCode.MatchString(code) {
				t.Fatalf("%d code %q is neither in the registry nor idemkit.: %s", status, code, text)
			}
		}
		if status < 400 || status == http.StatusConflict {
			return
		}
		// The client corrects its request and retries with the same key: it
		// is never refused as in flight (a 4xx leaves no claim behind).
		for _, k := range []string{value1, value2} {
			if k == "" {
				continue
			}
			fixed := &events.LambdaFunctionURLRequest{RawPath: "/exports", Body: `{"a":1}`,
				Headers: map[string]string{"idempotency-key": k, "content-type": "application/json"}}
			fixed.RequestContext.DomainName = req.RequestContext.DomainName
			fixed.RequestContext.HTTP.Method = http.MethodPost
			if s, txt := send(fixed); s >= 500 || strings.Contains(txt, "idempotency_in_flight") {
				t.Fatalf("after %d, the corrected request with its key is %d %s", status, s, txt)
			}
		}
	})
}

// TestFunctionURLNilEventIs400: a null payload (no event) is answered 400
// in the envelope; before, lambdaurl dereferenced the nil event and the
// invocation panicked (RED_TEAM 507).
func TestFunctionURLNilEventIs400(t *testing.T) {
	serve := idemlambdaurl.Wrap(http.NotFoundHandler())
	out, err := serve(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	if out.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"error":"validation_error"`) {
		t.Fatalf("%d %s", out.StatusCode, b)
	}
}
