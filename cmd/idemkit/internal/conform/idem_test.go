package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// idemAPIKeys are idemAPI's API keys, each a tenant and credential
// attributes: two tenants, and credentials that differ from the first in one
// scope part. The Guard reads the attributes through HTTPCredential.
var idemAPIKeys = map[string]map[string]string{
	"idem-key-1":        idemCred("t1", "ns1", "w1", "c1", "co1", "o1"),
	"idem-key-2":        idemCred("t2", "ns2", "w2", "c2", "co2", "o2"),
	"idem-key-ns2":      idemCred("t1", "ns2", "w1", "c1", "co1", "o1"),
	"idem-key-worker2":  idemCred("t1", "ns1", "w2", "c1", "co1", "o1"),
	"idem-key-client2":  idemCred("t1", "ns1", "w1", "c2", "co1", "o1"),
	"idem-key-company2": idemCred("t1", "ns1", "w1", "c1", "co2", "o1"),
	"idem-key-org2":     idemCred("t1", "ns1", "w1", "c1", "co1", "o2"),
}

// idemCred is a credential under every name a policy may read a part by.
func idemCred(tenant, ns, worker, client, company, org string) map[string]string {
	return map[string]string{"tenant": tenant, "namespace": ns, "worker": worker,
		"client": client, "clientId": client, "company": company, "companyId": company,
		"organisation": org, "organization": org, "organizationId": org}
}

// idemScopeKeys are idemAPI's credentials by scope part, for the profile.
func idemScopeKeys(p Profile) map[string]string {
	switch p {
	case ProfileCommerce:
		return map[string]string{ScopeNamespace: "idem-key-ns2", ScopeWorker: "idem-key-worker2"}
	case ProfileERP:
		return map[string]string{ScopeClient: "idem-key-client2", ScopeCompany: "idem-key-company2", ScopeOrganization: "idem-key-org2"}
	}
	return nil
}

// idemAPI is POST /runs, GET /runs/{id} and POST /runs/{id}/cancel behind
// idemkit's own Layer 1 (idem.Guard over the memory store, net/http
// middleware), with the conformance-noop, -delay and -unavailable fixtures
// and the ERP policy's public test route outside the Guard.
func idemAPI(t *testing.T, p idem.Policy, wait time.Duration) *httptest.Server {
	t.Helper()
	credOf := func(r *http.Request) (map[string]string, bool) {
		c, ok := idemAPIKeys[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		return c, ok
	}
	tenantOf := func(r *http.Request) (string, bool) {
		c, ok := credOf(r)
		return c["tenant"], ok
	}
	g, err := idem.New(idem.Config{
		Store: memstore.New(), Policy: p, Wait: wait, HTTPTenant: tenantOf,
		HTTPCredential: func(r *http.Request, name string) string { c, _ := credOf(r); return c[name] },
		Logger:         slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]string{}
	seq := 0
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		// Under the ERP policy an error envelope carries request_id; the
		// Guard sets it to the current attempt's id.
		if m, ok := v.(map[string]string); ok && m["error"] != "" && p.Name == "erp" {
			m["request_id"] = ""
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /runs", g.Handle("createRun", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := tenantOf(r)
		if !ok {
			writeJSON(w, 401, map[string]string{"error": "unauthenticated", "message": "no API key"})
			return
		}
		var req struct {
			WorkflowID string         `json:"workflowId"`
			Inputs     map[string]any `json:"inputs"`
		}
		if json.NewDecoder(r.Body).Decode(&req) != nil || (req.WorkflowID != "conformance-noop" && req.WorkflowID != "conformance-delay" && req.WorkflowID != "conformance-unavailable") {
			writeJSON(w, 400, map[string]string{"error": "validation_error", "message": "workflowId"})
			return
		}
		if req.WorkflowID == "conformance-unavailable" {
			writeJSON(w, 503, map[string]string{"error": "runner_unavailable", "message": "no runner"})
			return
		}
		if ms, _ := req.Inputs["delayMs"].(float64); req.WorkflowID == "conformance-delay" {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		mu.Lock()
		seq++
		id := fmt.Sprintf("run_%s_%d", tenant, seq)
		runs[id] = tenant
		mu.Unlock()
		writeJSON(w, 201, map[string]string{"runId": id, "status": "pending"})
	})))
	mux.Handle("POST /runs/{id}/cancel", g.Handle("cancelRun", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, _ := tenantOf(r)
		mu.Lock()
		owner, ok := runs[r.PathValue("id")]
		mu.Unlock()
		if !ok || owner != tenant {
			writeJSON(w, 404, map[string]string{"error": "not_found", "message": "no such run"})
			return
		}
		writeJSON(w, 200, map[string]string{"runId": r.PathValue("id"), "status": "cancelled"})
	})))
	mux.HandleFunc("POST /api/v1/inbound/work-orders/test", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]bool{"valid": true})
	})
	mux.HandleFunc("GET /runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		tenant, _ := tenantOf(r)
		mu.Lock()
		owner, ok := runs[r.PathValue("id")]
		mu.Unlock()
		if !ok || owner != tenant {
			writeJSON(w, 404, map[string]string{"error": "not_found", "message": "no such run"})
			return
		}
		writeJSON(w, 200, map[string]string{"runId": r.PathValue("id"), "status": "completed"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// idemkit's own Layer 1 passes the checker, in every profile and with both
// in-flight policies (bounded wait, immediate 409; the ERP policy allows
// only the 409).
func TestIdemGuardPasses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       idem.Policy
		profile Profile
		wait    time.Duration
	}{
		{"openwop/wait", idem.PolicyOpenWOP, ProfileOpenWOP, 0},
		{"openwop/409", idem.PolicyOpenWOP, ProfileOpenWOP, -1},
		{"commerce/wait", commerce.Policy, ProfileCommerce, 0},
		{"commerce/409", commerce.Policy, ProfileCommerce, -1},
		// The ERP policy answers a duplicate in progress 409 at once.
		{"erp/409", erp.Policy, ProfileERP, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := idemAPI(t, tc.p, tc.wait)
			rs, err := Run(context.Background(), Config{
				BaseURL: srv.URL, APIKeys: []string{"idem-key-1", "idem-key-2"}, Profile: tc.profile, ScopeKeys: idemScopeKeys(tc.profile),
				SlowBody: `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`,
				Stagger:  150 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				// Go's HTTP server trims the whitespace around a header value
				// before any handler runs, so the net/http middleware cannot
				// see it (idem's TestERPKeyWhitespaceInvisibleToNetHTTP); the
				// API Gateway adapters can. The checker must still see it.
				if tc.profile == ProfileERP && r.Scenario == "key-whitespace" {
					if r.Status != Fail {
						t.Fatalf("key-whitespace %s over net/http: the middleware now sees raw whitespace; update this test:\n%s", r.Status, dump(rs))
					}
					continue
				}
				// The answers made before any route runs (401, 404, 405,
				// 415) are the host's gateway's, not Layer 1's: this bare
				// ServeMux has none of them (idemkit dev's gateway passes).
				// So is the live work-order route with its contract (idemkit
				// dev serves it; functions/host/workorder).
				if tc.profile == ProfileERP && (r.Scenario == "request-id-everywhere" || r.Scenario == "live-route" || r.Scenario == "xml-replay" ||
					r.Scenario == "work-order-strict" || r.Scenario == "xml-error-answer") {
					continue
				}
				// The commerce Action as it is now is rendered from the object a
				// route declares it creates (idem.Request.Object, the host's
				// run routes); this bare handler declares none, so its replays
				// are the stored answers; nor has it run versions, retries or an inbox
				// (idemkit dev passes all four). Its pending answer, naming no
				// run, passes pending-action.
				if tc.profile == ProfileCommerce && (r.Scenario == "settled-replay" ||
					r.Scenario == "if-match-stale" || r.Scenario == "inbox-private" || r.Scenario == "retry-on-link") {
					continue
				}
				if r.Status != Pass {
					t.Fatalf("idem.Guard:\n%s", dump(rs))
				}
			}
			t.Logf("\n%s", dump(rs))
		})
	}
}
