package devstack

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestGateway: the dev server's net/http <-> payload 2.0 translation runs
// the authorizer on the run routes only and keeps %2F inside a path id.
func TestGateway(t *testing.T) {
	srv := httptest.NewServer(memGateway(t, "http://dev", nil))
	defer srv.Close()
	do := func(method, path, auth, key, body string) (*http.Response, map[string]any) {
		return testutil.DoJSON(t, method, srv.URL+path, body,
			"Authorization", testutil.Bearer(auth), "Idempotency-Key", key, "Content-Type", "application/json")
	}
	if r, m := do("POST", "/runs", "", "", `{"workflowId":"conformance-noop"}`); r.StatusCode != 401 || m["error"] != "unauthenticated" {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	if r, m := do("POST", "/runs", "wrong", "", `{"workflowId":"conformance-noop"}`); r.StatusCode != 401 || m["error"] != "unauthenticated" {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	key := "gw-0123456789abcdefghijkl"
	r1, m1 := do("POST", "/runs", "k1", key, `{"workflowId":"conformance-noop"}`)
	r2, _ := do("POST", "/runs", "k1", key, `{"workflowId":"conformance-noop"}`)
	if r1.StatusCode != 201 || r2.Header.Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("%d %v / %v", r1.StatusCode, m1, r2.Header)
	}
	id := m1["runId"].(string)
	if r, m := do("GET", "/runs/"+strings.Replace(id, "/", "%2F", 1), "k1", "", ""); r.StatusCode != 200 || m["runId"] != id {
		t.Fatalf("%%2F form: %d %v", r.StatusCode, m)
	}
	if r, m := do("DELETE", "/runs/"+strings.Replace(id, "/", "~2F", 1), "", "", ""); r.StatusCode != 405 || r.Header.Get("Allow") != "GET, HEAD" || m["error"] != apifn.CodeMethodNotAllowed {
		t.Fatalf("405: %d %v", r.StatusCode, m)
	}
	if r, _ := do("GET", "/.well-known/openwop", "", "", ""); r.StatusCode != 200 {
		t.Fatalf("capabilities %d", r.StatusCode)
	}
	if r, m := do("GET", "/elsewhere", "", "", ""); r.StatusCode != 404 || m["error"] != "not_found" {
		t.Fatalf("404: %d %v", r.StatusCode, m)
	}
}
