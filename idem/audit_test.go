package idem_test

// Tests added by the Layer-1 audit (see CHECKLIST.md): each one pins a
// Layer-1 requirement that was implemented but not, or not fully, proven.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/idemenv"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/shared"
)

// answer is an adapter-neutral view of a response.
type answer struct {
	status  int
	body    string
	headers http.Header
	cookies []string
}

func fromV2(r events.APIGatewayV2HTTPResponse) answer {
	h := http.Header{}
	for k, v := range r.Headers {
		h.Add(k, v)
	}
	return answer{status: r.StatusCode, body: r.Body, headers: h, cookies: r.Cookies}
}

func fromV1(r events.APIGatewayProxyResponse) answer {
	h := http.Header{}
	for k, v := range r.Headers {
		h.Add(k, v)
	}
	for k, vs := range r.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	body := r.Body
	if r.IsBase64Encoded {
		b, _ := base64.StdEncoding.DecodeString(body)
		body = string(b)
	}
	return answer{status: r.StatusCode, body: body, headers: h}
}

func fromRecorder(w *httptest.ResponseRecorder) answer {
	return answer{status: w.Code, body: w.Body.String(), headers: w.Header()}
}

// registry reads the OpenWOP error registry: code -> HTTP status.
func registry(t *testing.T) map[string]int {
	t.Helper()
	raw, err := os.ReadFile(shared.Path(t, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Rows []struct {
			Code       string `json:"code"`
			HTTPStatus int    `json:"httpStatus"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &f); err != nil || len(f.Rows) == 0 {
		t.Fatalf("errors.json: %v", err)
	}
	m := make(map[string]int, len(f.Rows))
	for _, r := range f.Rows {
		m[r.Code] = r.HTTPStatus
	}
	return m
}

// checkEnvelope asserts a {error, message, details?} envelope whose code is
// in the registry with this status, and nothing else at the top level.
func checkEnvelope(t *testing.T, reg map[string]int, a answer, wantStatus int, wantCode string) map[string]any {
	t.Helper()
	if a.status != wantStatus {
		t.Fatalf("status %d, want %d (body %q)", a.status, wantStatus, a.body)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a.body), &top); err != nil {
		t.Fatalf("not a JSON envelope: %q", a.body)
	}
	for k := range top {
		if k != "error" && k != "message" && k != "details" {
			t.Fatalf("envelope has extra member %q: %s", k, a.body)
		}
	}
	code, details := envelope(t, a.body)
	if code != wantCode {
		t.Fatalf("code %q, want %q", code, wantCode)
	}
	if st, ok := reg[code]; !ok || st != wantStatus {
		t.Fatalf("code %q is not a registry code with status %d (registry: %d, %v)", code, wantStatus, st, ok)
	}
	if ct := a.headers.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("envelope Content-Type %q", ct)
	}
	return details
}

// Every client mistake gets the envelope with a registry code (never a
// panic, never a 500), the handler does not run, and no record is written —
// the store is not even called.
func TestClientMistakesGetEnvelopeAndNoRecord(t *testing.T) {
	reg := registry(t)
	type tc struct {
		name   string
		status int
		code   string
		reason string // details.reason, if any
		mod    func(c *idem.Config)
	}
	required := func(c *idem.Config) { c.Required = true }
	bodyTenant := func(c *idem.Config) { c.BodyTenantField = "tenantId" }

	t.Run("HTTPAPI", func(t *testing.T) {
		for _, c := range []struct {
			tc
			ev func() events.APIGatewayV2HTTPRequest
		}{
			{tc{"key too short", 400, "idempotency_key_invalid", "length", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", "short", `{}`)
			}},
			{tc{"key bad charset", 400, "idempotency_key_invalid", "charset", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey+"/", `{}`)
			}},
			{tc{"key surrounded by whitespace", 400, "idempotency_key_invalid", "whitespace", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey+" ", `{}`)
			}},
			{tc{"comma-joined duplicates (v2 form)", 400, "idempotency_key_invalid", "multiple", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey+","+testKey, `{}`)
			}},
			{tc{"comma-joined with space", 400, "idempotency_key_invalid", "multiple", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey+", k_another_key_0123456789", `{}`)
			}},
			{tc{"two header names differing in case", 400, "idempotency_key_invalid", "multiple", nil}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", testKey, `{}`)
				ev.Headers["IDEMPOTENCY-KEY"] = testKey
				return ev
			}},
			{tc{"empty key", 400, "idempotency_key_invalid", "length", nil}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", "", `{}`)
				ev.Headers["Idempotency-Key"] = ""
				return ev
			}},
			{tc{"missing key on a Required route", 400, "idempotency_key_invalid", "missing", required}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", "", `{}`)
			}},
			{tc{"no headers at all on a Required route", 400, "idempotency_key_invalid", "missing", required}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", "", `{}`)
				ev.Headers = nil
				return ev
			}},
			{tc{"bad base64 body", 400, "validation_error", "", nil}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", testKey, "not base64!")
				ev.IsBase64Encoded = true
				return ev
			}},
			{tc{"invalid JSON", 400, "validation_error", "", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey, `{"a":1,}`)
			}},
			{tc{"duplicate JSON member", 400, "validation_error", "", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey, `{"a":1,"\u0061":2}`)
			}},
			{tc{"lone surrogate", 400, "validation_error", "", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey, `["\udfff"]`)
			}},
			{tc{"base64 body that is invalid JSON", 400, "validation_error", "", nil}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", testKey, base64.StdEncoding.EncodeToString([]byte("{\"a\":\"\xff\"}")))
				ev.IsBase64Encoded = true
				return ev
			}},
			{tc{"deeply nested JSON", 400, "validation_error", "", nil}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey, strings.Repeat("[", 20000)+strings.Repeat("]", 20000))
			}},
			{tc{"unauthenticated", 401, "unauthenticated", "", nil}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", testKey, `{}`)
				ev.RequestContext.Authorizer = nil
				return ev
			}},
			{tc{"authorizer tenant that is not a scalar", 401, "unauthenticated", "", nil}, func() events.APIGatewayV2HTTPRequest {
				ev := v2event("POST", "POST /runs", testKey, `{}`)
				ev.RequestContext.Authorizer.Lambda["tenantId"] = map[string]any{"id": "x"}
				return ev
			}},
			{tc{"body tenant differs from the credential", 403, "forbidden", "tenant_mismatch", bodyTenant}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey, `{"tenantId":"tenant-b"}`)
			}},
			{tc{"body tenant is an object", 403, "forbidden", "tenant_mismatch", bodyTenant}, func() events.APIGatewayV2HTTPRequest {
				return v2event("POST", "POST /runs", testKey, `{"tenantId":{"id":"tenant-a"}}`)
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, c.mod)
				h := &handler{}
				a := fromV2(e.call(h, c.ev()))
				d := checkEnvelope(t, reg, a, c.status, c.code)
				if c.reason != "" && d["reason"] != c.reason {
					t.Fatalf("details.reason %v, want %s", d["reason"], c.reason)
				}
				if h.Calls() != 0 || e.store.TotalCalls() != 0 || e.store.Len() != 0 {
					t.Fatalf("handler calls %d, store calls %v, records %d", h.Calls(), e.store.Calls(), e.store.Len())
				}
			})
		}
	})

	t.Run("REST", func(t *testing.T) {
		base := func() events.APIGatewayProxyRequest {
			return events.APIGatewayProxyRequest{
				HTTPMethod: "POST", Resource: "/runs", Path: "/runs",
				Headers:           map[string]string{"Idempotency-Key": testKey, "Content-Type": "application/json"},
				MultiValueHeaders: map[string][]string{"Idempotency-Key": {testKey}, "Content-Type": {"application/json"}},
				Body:              `{}`,
				RequestContext:    events.APIGatewayProxyRequestContext{RequestID: "r-" + randID(), Authorizer: map[string]any{"tenantId": testTenant}},
			}
		}
		for _, c := range []struct {
			tc
			edit func(ev *events.APIGatewayProxyRequest)
		}{
			{tc{"duplicate headers in multiValueHeaders (v1 form)", 400, "idempotency_key_invalid", "multiple", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders["Idempotency-Key"] = []string{testKey, "k_another_key_0123456789"}
				ev.Headers["Idempotency-Key"] = "k_another_key_0123456789" // API Gateway keeps the last one here
			}},
			{tc{"same key sent twice", 400, "idempotency_key_invalid", "multiple", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders["Idempotency-Key"] = []string{testKey, testKey}
			}},
			{tc{"duplicates under two spellings", 400, "idempotency_key_invalid", "multiple", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders["idempotency-key"] = []string{testKey}
			}},
			{tc{"comma-joined value in multiValueHeaders", 400, "idempotency_key_invalid", "multiple", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders["Idempotency-Key"] = []string{testKey + "," + testKey}
			}},
			{tc{"comma-joined value, headers only", 400, "idempotency_key_invalid", "multiple", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders = nil
				ev.Headers["Idempotency-Key"] = testKey + "," + testKey
			}},
			{tc{"key only in headers, invalid", 400, "idempotency_key_invalid", "length", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.MultiValueHeaders = map[string][]string{"Content-Type": {"application/json"}}
				ev.Headers["Idempotency-Key"] = "short"
			}},
			{tc{"missing key on a Required route", 400, "idempotency_key_invalid", "missing", required}, func(ev *events.APIGatewayProxyRequest) {
				ev.Headers, ev.MultiValueHeaders = nil, nil
			}},
			{tc{"bad base64 body", 400, "validation_error", "", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.Body, ev.IsBase64Encoded = "%%%", true
			}},
			{tc{"invalid JSON", 400, "validation_error", "", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.Body = `{"a"`
			}},
			{tc{"unauthenticated", 401, "unauthenticated", "", nil}, func(ev *events.APIGatewayProxyRequest) {
				ev.RequestContext.Authorizer = nil
			}},
			{tc{"body tenant differs from the credential", 403, "forbidden", "tenant_mismatch", bodyTenant}, func(ev *events.APIGatewayProxyRequest) {
				ev.Body = `{"tenantId":"other"}`
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, c.mod)
				calls := 0
				w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
					calls++
					return events.APIGatewayProxyResponse{StatusCode: 201, Body: "{}"}, nil
				})
				ev := base()
				c.edit(&ev)
				r, err := w(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				d := checkEnvelope(t, reg, fromV1(r), c.status, c.code)
				if c.reason != "" && d["reason"] != c.reason {
					t.Fatalf("details.reason %v, want %s", d["reason"], c.reason)
				}
				if calls != 0 || e.store.TotalCalls() != 0 || e.store.Len() != 0 {
					t.Fatalf("handler calls %d, store calls %v, records %d", calls, e.store.Calls(), e.store.Len())
				}
			})
		}
	})

	t.Run("net/http", func(t *testing.T) {
		tenant := func(c *idem.Config) {
			c.HTTPTenant = func(r *http.Request) (string, bool) { v := r.Header.Get("X-Tenant"); return v, v != "" }
		}
		for _, c := range []struct {
			tc
			req func() *http.Request
		}{
			{tc{"two Idempotency-Key headers", 400, "idempotency_key_invalid", "multiple", tenant}, func() *http.Request {
				r := httptest.NewRequest("POST", "/runs", strings.NewReader(`{}`))
				r.Header.Add("Idempotency-Key", testKey)
				r.Header.Add("Idempotency-Key", testKey)
				return r
			}},
			{tc{"comma-joined key header", 400, "idempotency_key_invalid", "multiple", tenant}, func() *http.Request {
				r := httptest.NewRequest("POST", "/runs", strings.NewReader(`{}`))
				r.Header.Set("Idempotency-Key", testKey+","+testKey)
				return r
			}},
			{tc{"body over 6 MB", 413, "payload_too_large", "", tenant}, func() *http.Request {
				r := httptest.NewRequest("POST", "/runs", strings.NewReader(strings.Repeat(" ", idem.MaxRequestBytes+1)))
				r.Header.Set("Idempotency-Key", testKey)
				return r
			}},
			{tc{"unreadable body", 400, "validation_error", "", tenant}, func() *http.Request {
				r := httptest.NewRequest("POST", "/runs", io.MultiReader(strings.NewReader("{"), errReader{}))
				r.Header.Set("Idempotency-Key", testKey)
				return r
			}},
			{tc{"invalid JSON", 400, "validation_error", "", tenant}, func() *http.Request {
				r := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1 "b":2}`))
				r.Header.Set("Idempotency-Key", testKey)
				return r
			}},
			{tc{"unauthenticated", 401, "unauthenticated", "", tenant}, func() *http.Request {
				r := httptest.NewRequest("POST", "/runs", strings.NewReader(`{}`))
				r.Header.Set("Idempotency-Key", testKey)
				r.Header.Del("X-Tenant")
				return r
			}},
			{tc{"missing key on a Required route", 400, "idempotency_key_invalid", "missing", func(c *idem.Config) { tenant(c); required(c) }}, func() *http.Request {
				return httptest.NewRequest("POST", "/runs", strings.NewReader(`{}`))
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				e := newEnv(t, c.mod)
				calls := 0
				h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					calls++
					w.WriteHeader(201)
				}))
				r := c.req()
				r.Header.Set("Content-Type", "application/json")
				if c.name != "unauthenticated" {
					r.Header.Set("X-Tenant", testTenant)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				d := checkEnvelope(t, reg, fromRecorder(w), c.status, c.code)
				if c.reason != "" && d["reason"] != c.reason {
					t.Fatalf("details.reason %v, want %s", d["reason"], c.reason)
				}
				if calls != 0 || e.store.TotalCalls() != 0 || e.store.Len() != 0 {
					t.Fatalf("handler calls %d, store calls %v, records %d", calls, e.store.Calls(), e.store.Len())
				}
			})
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// Outcomes that are never cached (400 idempotency_key_invalid, 400
// validation_error, 401, 403) produced by the handler itself delete the
// claim: the store is empty afterwards, whichever adapter.
func TestUncachedHandlerOutcomesLeaveStoreEmpty(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{400, `{"error":"idempotency_key_invalid","message":"x"}`},
		{400, `{"error":"validation_error","message":"x","details":{"field":"a"}}`},
		{401, `{"error":"unauthenticated","message":"x"}`},
		{403, `{"error":"forbidden","message":"x"}`},
		{403, `not even JSON`},
	} {
		t.Run(strconv.Itoa(c.status)+" "+c.body, func(t *testing.T) {
			e := newEnv(t, nil)
			h := &handler{status: c.status, body: c.body}
			ev := v2event("POST", "POST /runs", testKey, `{}`)
			r := e.call(h, ev)
			if r.StatusCode != c.status || r.Body != c.body {
				t.Fatalf("response changed: %+v", r)
			}
			if e.store.Len() != 0 {
				t.Fatalf("uncached outcome left %d record(s)", e.store.Len())
			}
			// REST and net/http adapters too.
			w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{StatusCode: c.status, Body: c.body}, nil
			})
			if _, err := w(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs",
				Headers:        map[string]string{"Idempotency-Key": testKey},
				RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"tenantId": testTenant}}}); err != nil {
				t.Fatal(err)
			}
			g, _ := idem.New(idem.Config{Store: e.store, Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}}, Logger: e.guard.Config().Logger,
				HTTPTenant: func(*http.Request) (string, bool) { return testTenant, true }})
			hh := g.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(c.status)
				_, _ = io.WriteString(w, c.body)
			}))
			req := httptest.NewRequest("POST", "/runs", strings.NewReader("{}"))
			req.Header.Set("Idempotency-Key", testKey)
			hh.ServeHTTP(httptest.NewRecorder(), req)
			if e.store.Len() != 0 || e.store.Calls()["Delete"] != 3 {
				t.Fatalf("records %d, calls %v", e.store.Len(), e.store.Calls())
			}
		})
	}
}

// GET, HEAD and OPTIONS never honour the key, in every adapter: an invalid
// key is not even rejected, the store is never called.
func TestSafeMethodsIgnoreKeyAllAdapters(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		t.Run(m, func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) {
				c.Required = true
				c.Policy = erp.Policy
				c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
			})
			calls := 0
			w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				calls++
				return events.APIGatewayProxyResponse{StatusCode: 200, Body: "ok"}, nil
			})
			r, _ := w(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: m, Resource: "/runs",
				MultiValueHeaders: map[string][]string{"Idempotency-Key": {"bad key", "second"}},
				RequestContext:    events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"tenantId": testTenant}}})
			if r.StatusCode != 200 || r.Headers[erp.HeaderReplayed] != "" {
				t.Fatalf("REST %s: %+v", m, r)
			}
			hh := e.guard.Handle(m+" /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				w.WriteHeader(200)
			}))
			req := httptest.NewRequest(m, "/runs", nil)
			req.Header.Add("Idempotency-Key", "bad key")
			req.Header.Add("Idempotency-Key", testKey)
			rec := httptest.NewRecorder()
			hh.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Header().Get(erp.HeaderReplayed) != "" {
				t.Fatalf("net/http %s: %d %v", m, rec.Code, rec.Header())
			}
			v := e.call(&handler{status: 200}, v2event(m, m+" /runs", "x,y", ""))
			if v.StatusCode != 200 {
				t.Fatalf("HTTP API %s: %+v", m, v)
			}
			if calls != 2 || e.store.TotalCalls() != 0 {
				t.Fatalf("calls %d, store calls %v", calls, e.store.Calls())
			}
		})
	}
}

// Set-Cookie is never stored, whatever its spelling or adapter, and never
// replayed; the first response still carries it.
func TestSetCookieNeverCached(t *testing.T) {
	id := scopeID(testTenant, "POST /runs", testKey)
	noCookie := func(t *testing.T, e *env) {
		t.Helper()
		rec, ok, _ := e.store.Get(context.Background(), id, e.clock.Now())
		if !ok || rec.Response == nil {
			t.Fatalf("no cached response")
		}
		for k := range rec.Response.Headers {
			if strings.EqualFold(k, "Set-Cookie") {
				t.Fatalf("stored response holds %s: %v", k, rec.Response.Headers)
			}
		}
		if rec.Response.Headers["X-Kept"] == nil {
			t.Fatalf("other headers not stored: %v", rec.Response.Headers)
		}
	}
	t.Run("HTTPAPI", func(t *testing.T) {
		e := newEnv(t, nil)
		w := e.guard.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "{}", Cookies: []string{"c=1"},
				Headers:           map[string]string{"set-cookie": "lower=1", "X-Kept": "y"},
				MultiValueHeaders: map[string][]string{"SET-COOKIE": {"upper=1", "upper=2"}}}, nil
		})
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		first, _ := w(context.Background(), ev)
		if len(first.Cookies) != 4 {
			t.Fatalf("first response cookies %v", first.Cookies)
		}
		noCookie(t, e)
		second, _ := w(context.Background(), ev)
		if len(second.Cookies) != 0 || second.Headers["Set-Cookie"] != "" || second.Headers[idem.HeaderOpenWOPReplay] != "true" {
			t.Fatalf("replay: %+v", second)
		}
	})
	t.Run("REST", func(t *testing.T) {
		e := newEnv(t, nil)
		w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			return events.APIGatewayProxyResponse{StatusCode: 201, Body: "{}",
				Headers:           map[string]string{"X-Kept": "y"},
				MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}}}, nil
		})
		ev := events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs", Headers: map[string]string{"Idempotency-Key": testKey},
			RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"tenantId": testTenant}}}
		first, _ := w(context.Background(), ev)
		if len(first.MultiValueHeaders["Set-Cookie"]) != 2 {
			t.Fatalf("first: %+v", first)
		}
		noCookie(t, e)
		second, _ := w(context.Background(), ev)
		if fromV1(second).headers.Get("Set-Cookie") != "" || second.Headers[idem.HeaderOpenWOPReplay] != "true" {
			t.Fatalf("replay: %+v", second)
		}
	})
	t.Run("net/http", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true } })
		h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Set("X-Kept", "y")
			w.WriteHeader(201)
		}))
		do := func() *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", "/runs", nil)
			r.Header.Set("Idempotency-Key", testKey)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		if first := do(); first.Header().Get("Set-Cookie") != "a=1" {
			t.Fatalf("first: %v", first.Header())
		}
		noCookie(t, e)
		if second := do(); second.Header().Get("Set-Cookie") != "" || second.Header().Get("OpenWOP-Idempotent-Replay") != "true" {
			t.Fatalf("replay: %v", second.Header())
		}
	})
}

// Replays are byte-exact (status, every header value in order, body bytes —
// binary included) and carry OpenWOP-Idempotent-Replay: true; the first
// response does not carry it.
func TestReplayByteExact(t *testing.T) {
	e := newEnv(t, nil)
	body := make([]byte, 4096)
	for i := range body {
		body[i] = byte(i * 7)
	}
	w := e.guard.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 202, IsBase64Encoded: true, Body: base64.StdEncoding.EncodeToString(body),
			Headers:           map[string]string{"Content-Type": "application/octet-stream", "ETag": `"v1"`},
			MultiValueHeaders: map[string][]string{"Link": {"<b>", "<a>", "<c>"}}}, nil
	})
	ev := v2event("POST", "POST /blobs", testKey, `{}`)
	first, _ := w(context.Background(), ev)
	second, _ := w(context.Background(), ev)
	if first.Headers[idem.HeaderOpenWOPReplay] != "" || second.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("replay marker: first %v second %v", first.Headers, second.Headers)
	}
	delete(second.Headers, idem.HeaderOpenWOPReplay)
	if second.StatusCode != 202 || !second.IsBase64Encoded || second.Body != first.Body || len(second.Headers) != len(first.Headers) {
		t.Fatalf("replay differs:\n%+v\n%+v", first, second)
	}
	for k, v := range first.Headers {
		if second.Headers[k] != v {
			t.Fatalf("header %s: %q vs %q", k, v, second.Headers[k])
		}
	}
	if second.Headers["Link"] != "<b>,<a>,<c>" {
		t.Fatalf("header value order lost: %q", second.Headers["Link"])
	}
}

// The ERP policy: Idempotency-Replayed true|false, the key echoed,
// Idempotency-Original-Request-ID and X-Request-ID on EVERY response of a
// guarded route — first executions, replays, requests without a key, and
// every error answer. An invalid key is never echoed. The opt-out route and
// safe methods get none.
func TestERPHeadersOnEveryResponse(t *testing.T) {
	const key = "ERP-WO-20260807-000001"
	const route = "POST /api/v1/inbound/work-orders"
	newERP := func(t *testing.T, mod func(c *idem.Config)) *env {
		return newEnv(t, func(c *idem.Config) {
			c.Policy = erp.Policy
			c.Wait = -1
			c.BodyTenantField = "tenantId"
			c.Routes = map[string]idem.Route{"POST /api/v1/inbound/work-orders/test": {Skip: true}}
			c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
			c.HTTPCredential = func(_ *http.Request, name string) string { return "cred-" + name }
			if mod != nil {
				mod(c)
			}
		})
	}
	check := func(t *testing.T, name string, a answer, reqID, wantKey, replayed, originalID string) {
		t.Helper()
		h := a.headers
		if h.Get("Idempotency-Replayed") != replayed || h.Get("X-Request-ID") != reqID ||
			h.Get("Idempotency-Original-Request-ID") != originalID || h.Get("Idempotency-Key") != wantKey ||
			len(h.Values("Idempotency-Replayed")) != 1 {
			t.Fatalf("%s: headers %v; want replayed=%s request=%s original=%s key=%q", name, h, replayed, reqID, originalID, wantKey)
		}
	}
	t.Run("HTTPAPI", func(t *testing.T) {
		e := newERP(t, nil)
		send := func(h *handler, ev events.APIGatewayV2HTTPRequest) (answer, string) {
			return fromV2(e.call(h, ev)), ev.RequestContext.RequestID
		}
		h := &handler{}
		ev := v2event("POST", route, key, `{}`)
		a, firstID := send(h, ev)
		check(t, "first", a, firstID, key, "false", firstID)
		a, id := send(h, v2event("POST", route, key, `{}`))
		check(t, "replay", a, id, key, "true", firstID)
		a, id = send(h, v2event("POST", route, key, `{"other":1}`))
		check(t, "mismatch", a, id, key, "false", id)
		a, id = send(h, v2event("POST", route, "", `{}`))
		check(t, "no key", a, id, "", "false", id)
		a, id = send(h, v2event("POST", route, " "+key, `{}`))
		check(t, "invalid key (not echoed)", a, id, "", "false", id)
		a, id = send(h, v2event("POST", route, key+","+key, `{}`))
		check(t, "duplicate key (not echoed)", a, id, "", "false", id)
		a, id = send(h, v2event("POST", route, "ERP-other-key-1", `{"a":`))
		check(t, "validation error", a, id, "ERP-other-key-1", "false", id)
		a, id = send(h, v2event("POST", route, "ERP-other-key-2", `{"tenantId":"x"}`))
		check(t, "403", a, id, "ERP-other-key-2", "false", id)
		un := v2event("POST", route, "ERP-other-key-3", `{}`)
		un.RequestContext.Authorizer = nil
		a, id = send(h, un)
		check(t, "401", a, id, "ERP-other-key-3", "false", id)
		a, id = send(&handler{err: errors.New("boom")}, v2event("POST", route, "ERP-other-key-4", `{}`))
		check(t, "500", a, id, "ERP-other-key-4", "false", id)
		a, id = send(&handler{status: 503}, v2event("POST", route, "ERP-other-key-5", `{}`))
		check(t, "503", a, id, "ERP-other-key-5", "false", id)

		// In flight: a pending record owned elsewhere.
		release, started := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.call(&handler{block: release, before: func(context.Context) { close(started) }}, v2event("POST", route, "ERP-inflight-1", `{}`))
		}()
		<-started
		a, id = send(&handler{}, v2event("POST", route, "ERP-inflight-1", `{}`))
		close(release)
		<-done
		check(t, "in flight", a, id, "ERP-inflight-1", "false", id)
		if a.status != 409 || a.headers.Get("Retry-After") != "2" {
			t.Fatalf("ERP in-flight: %+v", a)
		}
		if code, _ := envelope(t, a.body); code != erp.CodeRequestInProgress {
			t.Fatalf("ERP in-flight code %q", code)
		}

		// The opt-out route and safe methods are untouched.
		a, _ = send(h, v2event("POST", "POST /api/v1/inbound/work-orders/test", key, `{}`))
		b, _ := send(&handler{status: 200}, v2event("GET", "GET /api/v1/inbound/work-orders", key, ``))
		for _, x := range []answer{a, b} {
			if x.headers.Get("Idempotency-Replayed") != "" || x.headers.Get("X-Request-ID") != "" {
				t.Fatalf("opt-out/safe method decorated: %v", x.headers)
			}
		}
	})
	t.Run("net/http", func(t *testing.T) {
		e := newERP(t, nil)
		h := e.guard.Handle(route, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(201) }))
		do := func(key, reqID string) answer {
			r := httptest.NewRequest("POST", "/api/v1/inbound/work-orders", strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("X-Request-ID", reqID)
			if key != "" {
				r.Header.Set("Idempotency-Key", key)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return fromRecorder(w)
		}
		check(t, "first", do(key, "r1"), "r1", key, "false", "r1")
		check(t, "replay", do(key, "r2"), "r2", key, "true", "r1")
		check(t, "no key (streamed)", do("", "r3"), "r3", "", "false", "r3")
		check(t, "invalid key", do("bad key", "r4"), "r4", "", "false", "r4")
	})
}

// A duplicate's wait is bounded by the context (Lambda) deadline less
// WaitMargin, even when Wait is far longer: it answers 409
// idempotency_in_flight before the deadline. The time the wait spends is
// the Guard clock's Sleep, and each Sleep moves the request's deadline
// nearer by what it slept (shiftingDeadline): to the Guard, time passes
// towards the deadline as it sleeps, with no real wait and nothing that
// races this machine's speed.
func TestWaitBoundedByLambdaDeadline(t *testing.T) {
	const margin = 700 * time.Millisecond
	dctx := &shiftingDeadline{Context: lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "dup"})}
	e := newEnv(t, func(c *idem.Config) {
		c.Wait = time.Hour
		c.WaitMargin = margin
		c.Test.Clock = idemtest.ClockFuncs{
			NowFunc: c.Test.Clock.Now,
			SleepFunc: func(ctx context.Context, d time.Duration) error {
				dctx.shift(d) // only the duplicate sleeps
				return ctx.Err()
			},
		}
	})
	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.call(&handler{block: release, before: func(context.Context) { close(started) }}, v2event("POST", "POST /runs", testKey, `{}`))
	}()
	defer func() { close(release); <-done }()
	<-started
	// Two minutes to the deadline: a sleep of the wait takes at most
	// 500 ms of it, so the duplicate polls a few hundred times.
	const left = 2 * time.Minute
	dctx.set(time.Now().Add(left))
	dup := &handler{}
	r, err := e.guard.HTTPAPI(dup.v2)(dctx, v2event("POST", "POST /runs", testKey, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if rem := dctx.remaining(); rem <= 0 {
		t.Fatalf("answered only after the Lambda deadline (%s past it)", -rem)
	}
	if code, _ := envelope(t, r.Body); r.StatusCode != 409 || code != "idempotency_in_flight" || r.Headers["Retry-After"] == "" || dup.Calls() != 0 {
		t.Fatalf("%+v", r)
	}
	if e.store.Calls()["Get"] == 0 {
		t.Fatalf("the duplicate did not wait (no poll)")
	}
	// It waited up to the deadline less the margin, never beyond: what it
	// slept is at most that, and at least half of it (the rest is real
	// time this test took, far less than a minute unless it hangs).
	if slept := dctx.shifted(); slept > left-margin || slept < (left-margin)/2 {
		t.Fatalf("the duplicate slept %s of the %s left before the deadline less the margin (%s)", slept, left, margin)
	}
}

// shiftingDeadline is a request context whose deadline moves nearer by
// shift: a wait that sleeps on a clock that does not sleep for real still
// sees its deadline come.
type shiftingDeadline struct {
	context.Context
	mu       sync.Mutex
	deadline time.Time
	total    time.Duration // shifted in all
}

func (c *shiftingDeadline) set(d time.Time) {
	c.mu.Lock()
	c.deadline = d
	c.mu.Unlock()
}

func (c *shiftingDeadline) shift(d time.Duration) {
	c.mu.Lock()
	c.deadline = c.deadline.Add(-d)
	c.total += d
	c.mu.Unlock()
}

func (c *shiftingDeadline) shifted() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

func (c *shiftingDeadline) remaining() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Until(c.deadline)
}

func (c *shiftingDeadline) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, !c.deadline.IsZero()
}

// The tenant comes from the REST (v1) authorizer too: a Lambda authorizer
// context key, a JWT (Cognito) claim, or the IAM principal; never the body.
func TestTenantResolutionREST(t *testing.T) {
	for _, c := range []struct {
		name   string
		src    idem.TenantSource
		rc     events.APIGatewayProxyRequestContext
		tenant string // "" = unauthenticated
	}{
		{"authorizer key", idem.AuthorizerKey("org"), events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"org": "o1"}}, "o1"},
		{"authorizer key, number", idem.AuthorizerKey("org"), events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"org": float64(42)}}, "42"},
		{"jwt claim (any)", idem.JWTClaim("custom:tenant"),
			events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]any{"custom:tenant": "c1"}}}, "c1"},
		{"jwt claim (string map)", idem.JWTClaim(""),
			events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]string{"tenantId": "c2"}}}, "c2"},
		{"jwt claim missing", idem.JWTClaim(""),
			events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"tenantId": "not-a-claim"}}, ""},
		{"iam user arn", idem.IAMPrincipal(),
			events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::1:user/u", Caller: "AIDA"}}, "arn:aws:iam::1:user/u"},
		{"iam caller", idem.IAMPrincipal(),
			events.APIGatewayProxyRequestContext{Identity: events.APIGatewayRequestIdentity{Caller: "AIDA:session"}}, "AIDA:session"},
		{"iam absent", idem.IAMPrincipal(), events.APIGatewayProxyRequestContext{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = c.src; cfg.BodyTenantField = "tenantId" })
			w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{StatusCode: 201, Body: "{}"}, nil
			})
			body := `{}`
			if c.tenant != "" {
				body = `{"tenantId":` + strconv.Quote(c.tenant) + `}`
			}
			r, _ := w(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs",
				Headers: map[string]string{"Idempotency-Key": testKey, "Content-Type": "application/json"}, Body: body, RequestContext: c.rc})
			if c.tenant == "" {
				if r.StatusCode != 401 || e.store.Len() != 0 {
					t.Fatalf("unauthenticated: %+v", r)
				}
				return
			}
			if r.StatusCode != 201 {
				t.Fatalf("%+v", r)
			}
			if _, ok, _ := e.store.Get(context.Background(), scopeID(c.tenant, "POST /runs", testKey), e.clock.Now()); !ok {
				t.Fatalf("record not scoped to tenant %q", c.tenant)
			}
		})
	}
}

// Metric names: claim outcomes (claimed, reclaimed, replay, in-flight,
// mismatch) on one bounded dimension, openwop.idempotency.reclaims_total for
// lease reclaims only (not the re-run of a retryable failure), and
// idemkit.idempotency.lease_lost_writes_total for a write refused after the
// lease was lost — as well-formed EMF records.
func TestMetricsAllOutcomesAsEMF(t *testing.T) {
	var buf syncBuffer
	e := newEnv(t, func(c *idem.Config) { c.Metrics = emf.New(&buf, "idemkit-test") })
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	e.call(&handler{status: 503}, ev)                                     // claimed
	e.call(&handler{}, ev)                                                // reclaimed (a re-run: no reclaims_total)
	e.call(&handler{}, ev)                                                // replay
	e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{"y":1}`)) // mismatch
	// in-flight, then a fenced completion.
	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	ev2 := v2event("POST", "POST /runs", "k_second_key_0123456789", `{}`)
	go func() {
		defer close(done)
		e.call(&handler{block: release, before: func(context.Context) { close(started) }}, ev2)
	}()
	<-started
	e.call(&handler{}, ev2) // in-flight
	e.clock.Advance(idem.DefaultLease + time.Second)
	e.call(&handler{}, ev2) // reclaimed after its lease expired (+ reclaims_total), completes
	close(release)
	<-done // the first's completion is fenced

	counts := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("EMF line is not JSON: %q", line)
		}
		aws, _ := m["_aws"].(map[string]any)
		cwm, _ := aws["CloudWatchMetrics"].([]any)
		if _, ok := aws["Timestamp"].(float64); !ok || len(cwm) != 1 {
			t.Fatalf("not EMF: %s", line)
		}
		d := cwm[0].(map[string]any)
		name := d["Metrics"].([]any)[0].(map[string]any)["Name"].(string)
		dims := d["Dimensions"].([]any)[0].([]any)
		if d["Namespace"] != "idemkit-test" || len(dims) > 1 || (len(dims) == 1 && dims[0] != "Outcome") {
			t.Fatalf("unbounded or unexpected dimensions: %s", line)
		}
		v, _ := m[name].(float64)
		key := name
		if o, ok := m["Outcome"].(string); ok {
			key += "/" + o
		}
		counts[key] += v
	}
	want := map[string]float64{
		idem.MetricClaimOutcomes + "/claimed":         2,
		idem.MetricClaimOutcomes + "/reclaimed":       2,
		idem.MetricClaimOutcomes + "/replay":          1,
		idem.MetricClaimOutcomes + "/mismatch":        1,
		idem.MetricClaimOutcomes + "/in-flight":       1,
		"openwop.idempotency.reclaims_total":          1,
		"idemkit.idempotency.lease_lost_writes_total": 1,
	}
	// Layer 1 has no fence verdicts: the RFC 0150 fence metric is the
	// effect fence's alone.
	if _, ok := counts["openwop.idempotency.stale_fence_rejections_total"]; ok {
		t.Fatalf("Layer 1 emitted the fence verdict metric: %v", counts)
	}
	for k, v := range want {
		if counts[k] != v {
			t.Fatalf("metric %s = %v, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	if idem.MetricReclaims != "openwop.idempotency.reclaims_total" {
		t.Fatalf("MetricReclaims renamed: %s", idem.MetricReclaims)
	}
}

// The raw key never reaches the logs, on any path — including handler and
// panic texts that quote it; logs are JSON with request_id and key_hash.
func TestRawKeyNeverLoggedAnyPath(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Wait = 30 * time.Millisecond })
	key := testKey
	ev := v2event("POST", "POST /runs", key, `{}`)
	e.call(&handler{err: errors.New("db failed for key " + key)}, ev)                             // release
	e.call(&handler{before: func(context.Context) { panic("panic with " + key) }}, ev)            // panic
	e.call(&handler{status: 503}, ev)                                                             // retryable
	e.call(&handler{}, ev)                                                                        // reclaim + complete
	e.call(&handler{}, ev)                                                                        // replay
	e.call(&handler{}, v2event("POST", "POST /runs", key, `{"x":1}`))                             // mismatch
	e.call(&handler{status: 403}, v2event("POST", "POST /del", key, `{}`))                        // delete
	e.call(&handler{err: errors.New("no key path " + key)}, v2event("GET", "GET /runs", key, "")) // safe method, handler error
	// in flight + fenced completion
	release, started := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	ev2 := v2event("POST", "POST /slow", key, `{}`)
	go func() {
		defer close(done)
		e.call(&handler{block: release, before: func(context.Context) { close(started) }}, ev2)
	}()
	<-started
	e.call(&handler{}, ev2)
	e.clock.Advance(idem.DefaultLease + time.Second)
	e.call(&handler{}, ev2)
	close(release)
	<-done

	logs := e.logs.String()
	if strings.Contains(logs, key) {
		t.Fatalf("raw key logged:\n%s", logs)
	}
	for _, want := range []string{`"key_hash":"kh:`, `"request_id"`, "fenced write rejected", "in flight", "handler failed", "digest mismatch"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("logs lack %s:\n%s", want, logs)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("log line is not JSON: %q", line)
		}
	}
}

// Transactional completion whose fence fails: nothing is written (neither
// the business write nor a cached response), and the caller gets a
// retryable answer — 409 idempotency_in_flight with Retry-After — whose
// retry is the winner's replay.
func TestFencedTransactionalCompletionIsRetryable(t *testing.T) {
	reg := registry(t)
	e := newEnv(t, nil)
	ev := v2event("POST", "POST /orders", testKey, `{}`)
	release, started := make(chan struct{}), make(chan struct{})
	slow := &handler{block: release, body: `{"who":"slow"}`, before: func(ctx context.Context) {
		if err := idem.Transact(ctx, memstore.Write{Key: "order-slow", Value: []byte("v")}); err != nil {
			t.Errorf("Transact: %v", err)
		}
		close(started)
	}}
	var slowResp events.APIGatewayV2HTTPResponse
	done := make(chan struct{})
	go func() { defer close(done); slowResp = e.call(slow, ev) }()
	<-started
	e.clock.Advance(idem.DefaultLease)
	fast := &handler{body: `{"who":"fast"}`, before: func(ctx context.Context) {
		_ = idem.Transact(ctx, memstore.Write{Key: "order-fast", Value: []byte("v")})
	}}
	if r := e.call(fast, ev); r.Body != `{"who":"fast"}` {
		t.Fatalf("reclaim: %+v", r)
	}
	close(release)
	<-done
	a := fromV2(slowResp)
	checkEnvelope(t, reg, a, 409, "idempotency_in_flight")
	if ra, err := strconv.Atoi(a.headers.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("fenced answer without Retry-After: %v", a.headers)
	}
	if strings.Contains(a.body, "slow") {
		t.Fatalf("fenced answer leaked the stale body")
	}
	if _, ok := e.store.Item("order-slow"); ok {
		t.Fatalf("fenced completion committed its business write")
	}
	if _, ok := e.store.Item("order-fast"); !ok {
		t.Fatalf("winner's business write missing")
	}
	r := e.call(&handler{}, ev)
	if r.Body != `{"who":"fast"}` || r.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("retry after the fenced answer: %+v", r)
	}
}

// Panics anywhere in the handler are a 500 internal_error envelope (a
// registry code) and leave the record retryable, in every adapter.
func TestPanicIs500AndRetryableAllAdapters(t *testing.T) {
	reg := registry(t)
	id := scopeID(testTenant, "POST /runs", testKey)
	retryable := func(t *testing.T, e *env) {
		t.Helper()
		rec, ok, _ := e.store.Get(context.Background(), id, e.clock.Now())
		if !ok || rec.State != idem.StateRetryableFailure || rec.Response != nil {
			t.Fatalf("record after panic: %+v %v", rec, ok)
		}
	}
	t.Run("REST", func(t *testing.T) {
		e := newEnv(t, nil)
		w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			panic(errors.New("a panic carrying an error value"))
		})
		r, err := w(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs",
			Headers:        map[string]string{"Idempotency-Key": testKey},
			RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"tenantId": testTenant}}})
		if err != nil {
			t.Fatal(err)
		}
		checkEnvelope(t, reg, fromV1(r), 500, "internal_error")
		retryable(t, e)
	})
	t.Run("net/http", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true } })
		h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
			panic("half-written")
		}))
		req := httptest.NewRequest("POST", "/runs", nil)
		req.Header.Set("Idempotency-Key", testKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkEnvelope(t, reg, fromRecorder(w), 500, "internal_error")
		retryable(t, e)
	})
	t.Run("handler returns an invalid status", func(t *testing.T) {
		// Not a panic: the handler ran to its end, so the attempt is
		// recorded as run, its answer not kept (TestUnreadableAnswerRunsOnce).
		e := newEnv(t, nil)
		r := e.call(&handler{status: 1000}, v2event("POST", "POST /runs", testKey, `{}`))
		checkEnvelope(t, reg, fromV2(r), 500, "internal_error")
		rec, ok, _ := e.store.Get(context.Background(), id, e.clock.Now())
		if !ok || rec.State != idem.StateTerminalFailure || rec.Response == nil || rec.Response.NotKept == 0 || rec.Response.Status != 0 {
			t.Fatalf("record after an invalid status: %+v %v", rec, ok)
		}
	})
}

// Start-up validation reports every problem at once, each naming its field
// and the allowed range.
func TestConfigErrorsAreClear(t *testing.T) {
	badPolicy := idem.PolicyOpenWOP
	badPolicy.Name = "Bad Name"
	_, err := idem.New(idem.Config{
		Policy:          badPolicy,
		Lease:           10 * time.Second,
		Heartbeat:       -time.Second,
		LeaseSkew:       -time.Second,
		Retention:       -2 * time.Hour,
		WaitMargin:      -time.Second,
		Tenant:          idem.TenantSource{Kind: 9},
		Unauthenticated: idem.UnauthenticatedPolicy(5),
		Operations:      map[string]string{"POST /runs": ""},
		Normalize:       &canon.Normalizer{Name: "bad name"},
		Routes:          map[string]idem.Route{"POST /x": {Normalize: &canon.Normalizer{}}},
	})
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("err = %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"Store is required", `Policy.Name "Bad Name"`, "Lease 10s is outside 30s..1h0m0s", "Heartbeat",
		"LeaseSkew", "Retention -2h0m0s is negative", "WaitMargin", "Tenant.Kind 9", "Unauthenticated 5",
		`Operations entry "POST /runs" -> ""`, `Normalize: invalid Name "bad name"`, `Routes["POST /x"].Normalize: missing Name`,
	} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q does not mention %q", msg, want)
		}
	}
	if len(ce.Problems) != 12 || !strings.HasPrefix(msg, `idem: invalid config: Store is required; Policy.Name "Bad Name"`) {
		t.Fatalf("problems %d: %q", len(ce.Problems), msg)
	}
	_, err = idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Retention: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "below the openwop policy's minimum of 24h0m0s") {
		t.Fatalf("OpenWOP retention below 24h: %v", err)
	}
	// The environment path (the IDEMPOTENCY_* variables) feeds the same validation.
	env, err := idemenv.Load(func(k string) string {
		return map[string]string{idemenv.LeaseSeconds: "3601", idemenv.Required: "maybe"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), "IDEMPOTENCY_PROCESSING_LEASE_SECONDS=3601: must be 30..3600") ||
		!strings.Contains(err.Error(), `IDEMPOTENCY_REQUIRED="maybe"`) {
		t.Fatalf("env errors: %v (%+v)", err, env)
	}
}

// Disabled (IDEMPOTENCY_ENABLED=false) runs every request straight through:
// no validation, no record, no header.
func TestDisabled(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Disabled = true; c.Required = true; c.Policy = erp.Policy })
	h := &handler{}
	r1 := e.call(h, v2event("POST", "POST /runs", "bad key!", `{}`))
	r2 := e.call(h, v2event("POST", "POST /runs", testKey, `{}`))
	r3 := e.call(h, v2event("POST", "POST /runs", testKey, `{}`))
	if h.Calls() != 3 || e.store.TotalCalls() != 0 || r1.StatusCode != 201 || r2.Headers[erp.HeaderReplayed] != "" || r3.Body == r2.Body {
		t.Fatalf("disabled guard interfered: calls %d store %v", h.Calls(), e.store.Calls())
	}
}

// Concurrency through the net/http middleware: exactly one execution, every
// other request gets the winner's response as a replay.
func TestConcurrentDuplicatesMiddleware(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.Wait = time.Minute // a hang guard: duplicates wait for the winner however slow the machine
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	var mu sync.Mutex
	runs := 0
	h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		runs++
		n := runs
		mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "run-"+strconv.Itoa(n))
	}))
	const n = 24
	out := make([]*httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1}`))
			r.Header.Set("Idempotency-Key", testKey)
			r.Header.Set("Content-Type", "application/json")
			out[i] = httptest.NewRecorder()
			h.ServeHTTP(out[i], r)
		}()
	}
	wg.Wait()
	replays := 0
	for _, w := range out {
		if w.Code != 201 || w.Body.String() != "run-1" {
			t.Fatalf("duplicate got %d %q", w.Code, w.Body)
		}
		if w.Header().Get("OpenWOP-Idempotent-Replay") == "true" {
			replays++
		}
	}
	if runs != 1 || replays != n-1 {
		t.Fatalf("runs %d, replays %d", runs, replays)
	}
}

// The operation is the routed operation mapped through Config.Operations:
// two routes mapped to one operation id share a scope; the raw path never
// matters; unmapped routes are scoped by their routeKey.
func TestOperationMapping(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.Operations = map[string]string{"POST /runs": "createRun", "POST /v2/runs": "createRun"}
	})
	h := &handler{}
	first := e.call(h, v2event("POST", "POST /runs", testKey, `{}`))
	alias := v2event("POST", "POST /v2/runs", testKey, `{}`)
	alias.RawPath = "/v2/runs"
	if r := e.call(h, alias); r.Headers[idem.HeaderOpenWOPReplay] != "true" || r.Body != first.Body {
		t.Fatalf("aliased route is not the same operation: %+v", r)
	}
	if _, ok, _ := e.store.Get(context.Background(), scopeID(testTenant, "createRun", testKey), e.clock.Now()); !ok {
		t.Fatal("record not scoped by the operation id")
	}
	e.call(h, v2event("POST", "POST /other", testKey, `{}`))
	if h.Calls() != 2 {
		t.Fatalf("handler calls %d", h.Calls())
	}
}

// Route.JSON treats a body as JSON whatever its Content-Type: semantically
// equal bodies replay, invalid JSON is 400 validation_error; without it a
// non-JSON Content-Type hashes bytes (so reordered members mismatch).
func TestRouteJSONOption(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Routes = map[string]idem.Route{"POST /json": {JSON: true}} })
	h := &handler{}
	ev := func(route, body string) events.APIGatewayV2HTTPRequest {
		x := v2event("POST", route, testKey, body)
		x.Headers["content-type"] = "text/plain"
		return x
	}
	e.call(h, ev("POST /json", `{"a":1,"b":2}`))
	if r := e.call(h, ev("POST /json", `{"b":2,"a":1}`)); r.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("JSON route did not canonicalise: %+v", r)
	}
	if r := e.call(h, v2event("POST", "POST /json", "k_another_key_0123456789", `{"a":`)); r.StatusCode != 400 {
		t.Fatalf("invalid JSON on a JSON route: %+v", r)
	}
	e.call(h, ev("POST /bytes", `{"a":1,"b":2}`))
	if r := e.call(h, ev("POST /bytes", `{"b":2,"a":1}`)); r.StatusCode != 409 {
		t.Fatalf("byte-hashed route treated reordered JSON as equal: %+v", r)
	}
}
