package wireschema_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/internal/wireschema"
)

// Every schema the routes use compiles from the shared data alone, and the
// oracle is not vacuous: it refuses what the closed schemas refuse.
func TestOracleRefuses(t *testing.T) {
	o := wireschema.Load(t)
	for _, tc := range []struct {
		method, path string
		status       int
		good, bad    string
	}{
		{"GET", "/.well-known/openwop", 200, `{"protocolVersions":["2.21"],"preferredVersion":"2.21"}`,
			`{"protocolVersions":["2.21"],"preferredVersion":"2.21","host":{}}`},
		{"GET", "/runs/{runId}", 200,
			`{"runId":"acme/0123456789abcdef","workflowId":"w","status":"completed","eventLogSchemaVersion":3,"owner":{"tenant":"acme","subject":{"issuer":"urn:x","subjectId":"acme","tenant":"acme","lane":"api-key","kind":"workload"}}}`,
			`{"runId":"acme/0123456789abcdef","workflowId":"w","status":"succeeded","eventLogSchemaVersion":3,"owner":{"tenant":"acme","subject":{"issuer":"urn:x","subjectId":"acme","tenant":"acme","lane":"api-key","kind":"workload"}}}`},
		{"GET", "/runs/{runId}/effects", 200, `{"runId":"acme/0123456789abcdef","effects":[]}`, `{"runId":"acme/0123456789abcdef","effects":[],"x":1}`},
		{"POST", "/runs", 201, `{"runId":"acme/0123456789abcdef","status":"pending","eventsUrl":"http://h/e"}`, `{"runId":"acme/0123456789abcdef","status":"completed","eventsUrl":"http://h/e"}`},
		{"POST", "/runs", 409, `{"error":"idempotency_in_flight","message":"m"}`, `{"error":"idempotency_in_flight","message":"m","retryAfter":1}`},
		{"GET", "/runs/{runId}", 405, `{"error":"idemkit.method_not_allowed","message":"m"}`, `{"error":"openwop.nope","message":"m"}`},
		{"GET", "/runs/{runId}", 404, `{"error":"not_found","message":"m"}`, `not found`},
		{"GET", "/.well-known/openwop", 406, `{"error":"protocol_version_unsupported","message":"m","details":{"protocolVersions":["2.21"]}}`,
			`{"error":"protocol_version_unsupported","message":"m","protocolVersions":["2.21"]}`},
		{"POST", "/runs", 406, `{"error":"protocol_version_unsupported","message":"m","details":{"protocolVersions":["2.21"]}}`,
			`{"error":"protocol_version_unsupported"}`},
	} {
		s, where, err := o.Response(tc.method, tc.path, tc.status)
		if err != nil {
			t.Fatalf("%s %s %d: %v", tc.method, tc.path, tc.status, err)
		}
		if err := wireschema.Validate(s, []byte(tc.good)); err != nil {
			t.Errorf("%s: refused %s: %v", where, tc.good, err)
		}
		if wireschema.Validate(s, []byte(tc.bad)) == nil {
			t.Errorf("%s: accepted %s", where, tc.bad)
		}
	}
	// A conditional GET's 304 is listed with no body; a 200 is not bodiless.
	if b, err := o.Bodiless(http.MethodGet, "/runs/{runId}", http.StatusNotModified); err != nil || !b {
		t.Errorf("GET /runs/{runId} 304: bodiless %v, %v", b, err)
	}
	if b, err := o.Bodiless(http.MethodGet, "/runs/{runId}", http.StatusOK); err != nil || b {
		t.Errorf("GET /runs/{runId} 200: bodiless %v, %v", b, err)
	}
	if _, err := o.Bodiless(http.MethodPost, "/runs", http.StatusNotModified); err == nil {
		t.Error("POST /runs 304 is not in the contract, yet Bodiless accepted it")
	}
	if _, _, err := o.Response(http.MethodGet, "/nope", 200); err == nil {
		t.Error("unknown path accepted")
	}
	for _, name := range []string{"run-event.schema.json", "run-list-response.schema.json", "capabilities.schema.json"} {
		if _, err := o.Schema(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
