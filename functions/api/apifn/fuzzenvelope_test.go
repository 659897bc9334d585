package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/kit"
	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

var vendorErrorCode = regexp.MustCompile(`^idemkit\.[a-z][a-z0-9_]*$`)

// FuzzHandleEnvelope sends HTTP API (payload 2.0) events built from
// fuzzed parts to the api handler, wired as the api function wires it
// (Layer 1 with the host's routes and body tenant field, the ledger, the
// runs) over the memory stores, no store fault injected: the method, raw
// path and query, two headers whose names may spell Idempotency-Key,
// Content-Type or Accept in any case (the key under two spellings), the
// body with isBase64Encoded, and an authorizer context (a Lambda
// authorizer's tenantId as a string, an object or a number, a JWT claim,
// or none). Whatever arrives: no
// panic, no error, never a 5xx; every non-2xx answer but HEAD's and a
// 304 is the envelope {error, message, details?} whose code is the
// OpenWOP registry's or the idemkit. vendor form; and after a 4xx, each
// key the request carried, sent again on the same route with a
// well-formed body, is never refused as in flight (a refused request
// leaves no Layer 1 claim behind). The seed corpus is in
// testdata/fuzz/FuzzHandleEnvelope.
func FuzzHandleEnvelope(f *testing.F) {
	raw, err := os.ReadFile(shared.Path(f, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		f.Fatal(err)
	}
	var doc struct {
		Rows []struct {
			Code string `json:"code"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Rows) == 0 {
		f.Fatalf("errors.json: %v", err)
	}
	reg := map[string]bool{}
	for _, r := range doc.Rows {
		reg[r.Code] = true
	}
	const k1, k2 = "k-0123456789abcdefghijkl", "k-0123456789abcdefghijkm"
	noop := `{"workflowId":"conformance-noop"}`
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "acme", 0)
	f.Add("POST", "/runs", "", "Idempotency-Key", k1, "idempotency-key", k2, noop, false, "acme", 0)
	f.Add("POST", "/runs", "", "IDEMPOTENCY-KEY", k1, "Content-Type", "text/plain", noop, false, "acme", 1)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", "eyJ3b3JrZmxvd0lkIjoiY29uZm9ybWFuY2Utbm9vcCJ9", true, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", "!!not base64", true, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", `{"workflowId":"conformance-noop","tenantId":"globex"}`, false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", `{"workflowId":"nope"}`, false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", `{"workflowId":"conformance-noop"`, false, "acme", 2)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", `{"workflowId":"conformance-noop","workflowId":"x"}`, false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", strings.Repeat("k", 300), "content-type", "application/json", noop, false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", "", "content-type", "", "", false, "", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-encoding", "gzip", noop, false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "accept", "text/html", noop, false, "acme", 0)
	f.Add("POST", "/runs", "a=1&a=2&%zz", "idempotency-key", k1, "content-type", "application/json; charset=latin1", noop, false, "acme", 0)
	f.Add("POST", "/runs/acme%2Fx/cancel", "", "idempotency-key", k1, "content-type", "application/json", `{"reason":"r"}`, false, "acme", 0)
	f.Add("POST", "/runs:bulk-cancel", "", "idempotency-key", k1, "content-type", "application/json", `{"runIds":[1],"reason":"r"}`, false, "acme", 0)
	f.Add("GET", "/runs", "limit=0&cursor=!!", "", "", "", "", "", false, "acme", 0)
	f.Add("GET", "/runs/zz/events", "streamMode=values&bufferMs=-1", "last-event-id", "x", "", "", "", false, "acme", 0)
	f.Add("HEAD", "/runs", "", "", "", "", "", "", false, "acme", 0)
	f.Add("post", "/RUNS", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", strings.Repeat("[", 5000), false, "acme", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "acme\x00", 2)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "acme/evil", 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, strings.Repeat("t", 2000), 0)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "", 1)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "acme", 3)
	f.Add("POST", "/runs", "", "idempotency-key", k1, "content-type", "application/json", noop, false, "acme", 4)

	f.Fuzz(func(t *testing.T, method, rawPath, query, name1, value1, name2, value2, body string, b64 bool, tenant string, authShape int) {
		g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: discard(),
			BodyTenantField: "tenantId", Wait: -1, Routes: kit.Layer1Routes()})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
		if err != nil {
			t.Fatal(err)
		}
		h, err := New(Config{Runs: hostruns.NewMemRuns(), Guard: g, Ledger: l, Logger: discard(),
			Test: TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}})
		if err != nil {
			t.Fatal(err)
		}
		event := func(method, rawPath, query, body string, b64 bool, headers map[string]string) events.APIGatewayV2HTTPRequest {
			ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: rawPath, RawQueryString: query,
				Body: body, IsBase64Encoded: b64, Headers: headers}
			ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, rawPath
			ev.RequestContext.RequestID, ev.RequestContext.DomainName = "fuzz", "api.example.com"
			switch authShape % 5 {
			case 0:
				if tenant != "" {
					ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": tenant}}
				}
			case 1:
				ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
					JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"tenantId": tenant}}}
			case 3: // a Lambda authorizer's context that is not a string
				ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": map[string]any{"id": tenant}}}
			case 4:
				ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": float64(len(tenant))}}
			}
			return ev
		}
		send := func(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			t.Helper()
			resp, err := h.Handle(context.Background(), ev)
			if err != nil {
				t.Fatalf("%s %q: Handle returned an error: %v", ev.RequestContext.HTTP.Method, ev.RawPath, err)
			}
			if resp.StatusCode < 200 || resp.StatusCode > 499 {
				t.Fatalf("%s %q: status %d for a client's request: %s", ev.RequestContext.HTTP.Method, ev.RawPath, resp.StatusCode, resp.Body)
			}
			if resp.StatusCode < 300 || resp.StatusCode == http.StatusNotModified || ev.RequestContext.HTTP.Method == http.MethodHead {
				return resp
			}
			var top map[string]json.RawMessage
			if json.Unmarshal([]byte(resp.Body), &top) != nil {
				t.Fatalf("%d is not an error envelope: %q", resp.StatusCode, resp.Body)
			}
			var code, msg string
			if json.Unmarshal(top["error"], &code) != nil || json.Unmarshal(top["message"], &msg) != nil || code == "" || msg == "" {
				t.Fatalf("%d is not an error envelope: %s", resp.StatusCode, resp.Body)
			}
			for k := range top {
				if k != "error" && k != "message" && k != "details" {
					t.Fatalf("envelope has extra member %q: %s", k, resp.Body)
				}
			}
			if !reg[code] && !vendorErrorCode.MatchString(code) {
				t.Fatalf("%d code %q is neither the registry's nor idemkit.'s: %s", resp.StatusCode, code, resp.Body)
			}
			return resp
		}
		headers := map[string]string{}
		if name1 != "" {
			headers[name1] = value1
		}
		if name2 != "" {
			headers[name2] = value2
		}
		first := send(event(method, rawPath, query, body, b64, headers))
		if first.StatusCode < 400 {
			return
		}
		for _, k := range []string{value1, value2} {
			if k == "" {
				continue
			}
			for _, fixed := range []string{noop, `{"reason":"r"}`} {
				r := send(event(method, rawPath, query, fixed, false, map[string]string{"idempotency-key": k, "content-type": "application/json"}))
				if strings.Contains(r.Body, "idempotency_in_flight") {
					t.Fatalf("after %d %s, the corrected request with its key is refused as in flight: %d %s", first.StatusCode, first.Body, r.StatusCode, r.Body)
				}
			}
		}
	})
}
