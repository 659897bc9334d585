package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// FuzzHandle sends arbitrary requests (method, raw path, query, body, base64
// flag, Idempotency-Key, authorizer tenant, Content-Type) to the api
// handler. Whatever arrives, the answer is a client answer, never a panic,
// an error or a 500: a status in 200..599 other than 500; every 4xx/5xx is
// an error envelope {error, message}, except HEAD's, which has no content; an error never echoes an
// Idempotency-Key the request did not also carry in its path, query or body;
// and no caller but tenant "acme" ever receives a byte of acme's run. The
// seed corpus is in testdata/fuzz/FuzzHandle; run it longer with
// `go test -run '^$' -fuzz FuzzHandle -fuzztime 30s ./functions/api/apifn/`.
func FuzzHandle(f *testing.F) {
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: discard()})
	if err != nil {
		f.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		f.Fatal(err)
	}
	runs := hostruns.NewMemRuns()
	h, err := New(Config{Runs: runs, Guard: g, Ledger: l, Logger: discard(),
		Test: TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}})
	if err != nil {
		f.Fatal(err)
	}
	secretRun := hostruns.NewRun("acme", webhook.WorkflowNoop, json.RawMessage(`{"secret":"acme-only-9f8e7d"}`), time.Now())
	if err := runs.Create(context.Background(), secretRun); err != nil {
		f.Fatal(err)
	}
	opaque := secretRun.ID[len("acme/"):]
	p := "/runs/" + hostruns.ProjectID(secretRun.ID)

	f.Add("POST", "/runs", "", `{"workflowId":"conformance-noop"}`, false, "k-0123456789abcdefghijkl", "acme", "application/json")
	f.Add("POST", "/runs", "", `{"workflowId":"webhook","inputs":{"url":"http://169.254.169.254/"}}`, false, "k-0123456789abcdefghijkm", "acme", "application/json")
	f.Add("POST", "/runs", "", `{"workflowId":"conformance-delay","inputs":{"delayMs":"5"}}`, false, "", "acme", "")
	f.Add("POST", "/runs", "", "eyJ3b3JrZmxvd0lkIjoiY29uZm9ybWFuY2Utbm9vcCJ9", true, "", "acme", "application/json")
	f.Add("POST", "/runs", "", "!!notbase64", true, "", "acme", "application/json")
	f.Add("POST", "/runs", "", `[1,2]`, false, "not a key, SECRETKEY-0123456789", "acme", "text/plain")
	f.Add("GET", p, "", "", false, "", "acme", "")
	f.Add("GET", p, "", "", false, "", "globex", "")
	f.Add("GET", p+"/effects", "", "", false, "", "globex", "")
	f.Add("GET", p+"/events", "streamMode=values&bufferMs=99999", "", false, "", "acme", "")
	f.Add("GET", "/runs/acme%2F"+opaque+"/events", "", "", false, "", "globex", "")
	f.Add("POST", p+"/cancel", "", `{}`, false, "k-0123456789abcdefghijkn", "globex", "application/json")
	f.Add("POST", p+"/cancel", "", `{}`, false, "k-0123456789abcdefghijko", "", "application/json")
	f.Add("HEAD", "/runs/acme/"+opaque, "", "", false, "", "acme", "")
	f.Add("HEAD", "/runs/acme/"+opaque, "", "", false, "", "globex", "")
	f.Add("DELETE", "/runs/~zz/effects", "", "", false, "", "anon:x", "")
	f.Add("GET", "/.well-known/openwop", "", "", false, "", "", "")
	f.Add("GET", "/openapi.json", "", "", false, "", "", "")
	f.Add("POST", "/openapi.json", "", `{}`, false, "", "acme", "application/json")
	f.Add("PUT", "/runs/%zz", "%%", "", false, "", "acme", "")
	f.Add("POST", "/runs:bulk-cancel", "", `{"runIds":["`+secretRun.ID+`"],"reason":"r"}`, false, "k-0123456789abcdefghijkp", "globex", "application/json")
	f.Add("POST", "/runs:bulk-cancel", "", `{"runIds":[],"x":1}`, false, "", "acme", "application/json")
	f.Add("POST", p+":pause", "", `{"drainPolicy":"immediate","reason":"r"}`, false, "k-0123456789abcdefghijkq", "globex", "application/json")
	f.Add("POST", p+":resume", "", `{"reason":1}`, false, "", "acme", "application/json")
	f.Add("POST", "/inbox/AAAAAAAAAAAAAAAAAAAAAA/resubmit", "", `{"tenantId":"acme"}`, false, "k-0123456789abcdefghijkr", "globex", "text/plain")
	f.Add("GET", "/inbox", "", "", false, "", "globex", "")
	f.Add("POST", p+"/retry", "", `{}`, false, "k-0123456789abcdefghijks", "globex", "application/json")

	f.Fuzz(func(t *testing.T, method, rawPath, query, body string, b64 bool, key, tenant, contentType string) {
		ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: rawPath, RawQueryString: query,
			Body: body, IsBase64Encoded: b64, Headers: map[string]string{}}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, rawPath
		ev.RequestContext.RequestID, ev.RequestContext.DomainName = "fuzz", "api.example.com"
		if key != "" {
			ev.Headers["idempotency-key"] = key
		}
		if contentType != "" {
			ev.Headers["content-type"] = contentType
		}
		if tenant != "" {
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": tenant}}
		}
		resp, err := h.Handle(context.Background(), ev)
		if err != nil {
			t.Fatalf("Handle returned an error: %v", err)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 599 || resp.StatusCode == http.StatusInternalServerError {
			t.Fatalf("%s %q: status %d %s", method, rawPath, resp.StatusCode, resp.Body)
		}
		hdrs, _ := json.Marshal(resp.Headers)
		if method == http.MethodHead && (resp.Body != "" || resp.IsBase64Encoded) {
			t.Fatalf("HEAD %q: %d with content %q (RFC 9110 §9.3.2: none)", rawPath, resp.StatusCode, resp.Body)
		}
		if resp.StatusCode >= 400 && method != http.MethodHead {
			var env struct {
				Error   string `json:"error"`
				Message string `json:"message"`
			}
			if json.Unmarshal([]byte(resp.Body), &env) != nil || env.Error == "" || env.Message == "" {
				t.Fatalf("%s %q: %d is not an error envelope: %s", method, rawPath, resp.StatusCode, resp.Body)
			}
			if len(key) >= 16 && !strings.Contains(rawPath+query+body, key) &&
				(strings.Contains(resp.Body, key) || strings.Contains(string(hdrs), key)) {
				t.Fatalf("error %d echoes the Idempotency-Key: %s %s", resp.StatusCode, hdrs, resp.Body)
			}
		}
		if tenant != "acme" && (strings.Contains(resp.Body, "acme-only-9f8e7d") ||
			!strings.Contains(rawPath+query+body, opaque) && strings.Contains(resp.Body+string(hdrs), opaque)) {
			t.Fatalf("tenant %q received acme's run: %d %s", tenant, resp.StatusCode, resp.Body)
		}
		if tenant != "acme" && resp.StatusCode == http.StatusOK && strings.Contains(resp.Body, opaque) &&
			!strings.Contains(rawPath+query+body, opaque) { // a bulk cancel's entry names the id it was sent
			t.Fatalf("tenant %q read acme's run: %s", tenant, resp.Body)
		}
	})
}
