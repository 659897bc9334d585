package idem_test

import (
	"encoding/json"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/idemenv"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestCanonicalERPHashesTenantContractAndVersionOnly: the ERP policy's
// canonical bytes are exactly the RFC 8785 form of the resolved company and
// organisation, the endpoint contract version and the normalised request:
// neither the client (a scope part, not the payload) nor anything else of
// the scope.
func TestCanonicalERPHashesTenantContractAndVersionOnly(t *testing.T) {
	b, err := erp.Policy.Canonical(canon.Request{
		Request:         map[string]any{"work_order_number": "WO-1", "projects": []any{map[string]any{"code": "P-1", "quantity": 2}}},
		ContractVersion: "inbound-work-orders/v1",
		Scope: canon.Scope{Tenant: "acme", Method: "POST", Operation: "POST /api/v1/inbound/work-orders",
			Credential: map[string]string{erp.CredentialClient: "client-1", erp.CredentialCompany: "C100", erp.CredentialOrganization: "ORG-1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"company_id":"C100","contract_version":"inbound-work-orders/v1","organization_id":"ORG-1",` +
		`"request":{"projects":[{"code":"P-1","quantity":2}],"work_order_number":"WO-1"}}`
	if string(b) != want {
		t.Fatalf("canonical bytes\n %s\nwant\n %s", b, want)
	}
}

// TestERPErrorBodyCodesAndRequestID: the ERP envelope's error is the ERP
// code itself — IDEMPOTENCY_REQUEST_IN_PROGRESS for in-flight,
// IDEMPOTENCY_KEY_CONFLICT with the policy's exact message for a payload
// conflict — and the registry code where the policy defines none; every
// envelope carries request_id, the current attempt's id, and no
// details.profileCode.
func TestERPErrorBodyCodesAndRequestID(t *testing.T) {
	for _, c := range []struct {
		code, message, wantCode, wantMessage string
		details                              map[string]any
	}{
		{"idempotency_in_flight", "A request with this Idempotency-Key is still being processed.", erp.CodeRequestInProgress, "A request with this Idempotency-Key is still being processed.", nil},
		{"idempotency_key_mismatch", "anything", erp.CodeKeyConflict, "The Idempotency-Key has already been used with a different request payload.", nil},
		{"idempotency_key_invalid", "The Idempotency-Key header is invalid (length).", "idempotency_key_invalid", "The Idempotency-Key header is invalid (length).", map[string]any{"reason": "length"}},
		{"unauthenticated", "Authentication is required.", "unauthenticated", "Authentication is required.", nil},
	} {
		body := erp.Policy.ErrorBody(idem.ErrorInfo{Status: 409, Code: c.code, Message: c.message, Details: c.details, RequestID: "req-7"})
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got["error"] != c.wantCode || got["message"] != c.wantMessage || got["request_id"] != "req-7" || strings.Contains(string(body), "profileCode") {
			t.Fatalf("%s: %s", c.code, body)
		}
		if d, _ := got["details"].(map[string]any); (c.details == nil) != (d == nil) {
			t.Fatalf("%s: details %v, want %v", c.code, got["details"], c.details)
		}
	}
}

// TestERPRequestIDMemberOnlyTopLevelJSON: the current request id replaces
// only a top-level request_id member of a JSON object body; a nested one, a
// body without one, and a body that is not JSON are replayed as stored.
func TestERPRequestIDMemberOnlyTopLevelJSON(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Policy = erp.Policy })
	for i, c := range []struct {
		body, contentType string
		stamped           bool
	}{
		{`{"request_id":"first","ok":true}`, "application/json", true},
		{`{"data":{"request_id":"first"}}`, "application/json", false},
		{`{"ok":true}`, "application/json", false},
		{`request_id=first`, "text/plain", false},
		{`[{"request_id":"first"}]`, "application/json", false},
	} {
		h := &handler{body: c.body, hdrs: map[string]string{"Content-Type": c.contentType}}
		key := "ERP-WO-member-" + itoa(i)
		e.call(h, v2event("POST", "POST /api/v1/inbound/work-orders", key, `{}`))
		ev := v2event("POST", "POST /api/v1/inbound/work-orders", key, `{}`)
		r := e.call(h, ev)
		want := c.body
		if c.stamped {
			want = strings.Replace(c.body, "first", ev.RequestContext.RequestID, 1)
		}
		if r.Headers["Idempotency-Replayed"] != "true" || r.Body != want {
			t.Fatalf("%s: replay %v %s, want %s", c.body, r.Headers, r.Body, want)
		}
	}
}

// TestERPLeaseSecondsBounds30To3600Default300: the processing lease is
// IDEMPOTENCY_PROCESSING_LEASE_SECONDS, 30..3600 seconds, default 300; a
// value outside the range is refused naming the variable.
func TestERPLeaseSecondsBounds30To3600Default300(t *testing.T) {
	lease := func(v string) (time.Duration, error) {
		env, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.LeaseSeconds: v}[k] })
		if err != nil {
			return 0, err
		}
		cfg := idem.Config{Store: newEnv(t, nil).store, Tenant: idem.AuthorizerKey("tenantId"), Policy: erp.Policy}
		env.Apply(&cfg)
		g, err := idem.New(cfg)
		if err != nil {
			return 0, err
		}
		return g.Config().Lease, nil
	}
	for v, want := range map[string]time.Duration{"": 300 * time.Second, "30": 30 * time.Second, "3600": time.Hour, "300": 300 * time.Second} {
		if got, err := lease(v); err != nil || got != want {
			t.Fatalf("%s=%q: %s %v, want %s", idemenv.LeaseSeconds, v, got, err, want)
		}
	}
	for _, v := range []string{"29", "3601", "0", "-5", "1.5"} {
		if _, err := lease(v); err == nil || !strings.Contains(err.Error(), idemenv.LeaseSeconds) {
			t.Fatalf("%s=%q accepted: %v", idemenv.LeaseSeconds, v, err)
		}
	}
}

// TestERPNetHTTPSingleTenantNeedsNoCredential: without authentication (a
// single-tenant net/http guard, no HTTPCredential) the ERP policy's client,
// company and organisation are the anonymous ones: a keyed request runs once
// and replays.
func TestERPNetHTTPSingleTenantNeedsNoCredential(t *testing.T) {
	g, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Policy: erp.Policy, Tenant: idem.SingleTenant("erp")})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	h := g.Handle("POST /api/v1/inbound/work-orders", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(201)
	}))
	var replayed []string
	for range 2 {
		r := httptest.NewRequest("POST", "/api/v1/inbound/work-orders", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Idempotency-Key", "ERP-WO-20260807-000001")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 201 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		replayed = append(replayed, w.Header().Get(erp.HeaderReplayed))
	}
	if runs != 1 || replayed[0] != "false" || replayed[1] != "true" {
		t.Fatalf("runs %d, replayed %v; want one run and a replay", runs, replayed)
	}
}

// TestERPEveryEnvelopeCarriesRequestID: under the ERP policy every error
// envelope carries request_id, the current attempt's id — the handler's own
// envelopes too (a validation 400 that records nothing, a business 409 that
// is replayed), not only the Guard's. A success body without request_id is
// left as the handler wrote it.
func TestERPEveryEnvelopeCarriesRequestID(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Policy = erp.Policy })
	for i, c := range []struct {
		status  int
		body    string
		stamped bool
	}{
		{400, `{"error":"validation_error","message":"workflowId is required"}`, true},
		{409, `{"error":"NO_PROJECT_PROCESSED","message":"no project","details":{"n":0}}`, true},
		{201, `{"ok":true}`, false},
	} {
		h := &handler{status: c.status, body: c.body, hdrs: map[string]string{"Content-Type": "application/json"}}
		key := "ERP-WO-envelope-" + itoa(i)
		for attempt := 0; attempt < 2; attempt++ {
			ev := v2event("POST", "POST /api/v1/inbound/work-orders", key, `{}`)
			r := e.call(h, ev)
			var got map[string]any
			if err := json.Unmarshal([]byte(r.Body), &got); err != nil {
				t.Fatalf("%s: %v", r.Body, err)
			}
			if c.stamped && got["request_id"] != ev.RequestContext.RequestID {
				t.Fatalf("%d attempt %d: %s has request_id %v, want %s", c.status, attempt+1, r.Body, got["request_id"], ev.RequestContext.RequestID)
			}
			if !c.stamped && r.Body != c.body {
				t.Fatalf("%d: body %s, want %s", c.status, r.Body, c.body)
			}
		}
	}
}
