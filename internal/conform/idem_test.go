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
)

// idemAPI is POST /runs and GET /runs/{id} behind idemkit's own Layer 1
// (idem.Guard over the memory store, net/http middleware).
func idemAPI(t *testing.T, p idem.Policy, wait time.Duration) *httptest.Server {
	t.Helper()
	tenants := map[string]string{"idem-key-1": "t1", "idem-key-2": "t2"}
	tenantOf := func(r *http.Request) (string, bool) {
		t, ok := tenants[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		return t, ok
	}
	// The ERP policy also scopes keys by the credential's client, company
	// and organisation: here each API key's tenant stands for all three.
	credentialOf := func(r *http.Request, _ string) string { t, _ := tenantOf(r); return t }
	g, err := idem.New(idem.Config{
		Store: memstore.New(), Policy: p, Wait: wait, HTTPTenant: tenantOf, HTTPCredential: credentialOf,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]string{}
	seq := 0
	writeJSON := func(w http.ResponseWriter, status int, v any) {
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
		if json.NewDecoder(r.Body).Decode(&req) != nil || (req.WorkflowID != "conformance-noop" && req.WorkflowID != "conformance-delay") {
			writeJSON(w, 400, map[string]string{"error": "validation_error", "message": "workflowId"})
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

// idemkit's own Layer 1 passes the checker, in both profiles and with both
// in-flight policies (bounded wait, immediate 409).
func TestIdemGuardPasses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       idem.Policy
		profile Profile
		wait    time.Duration
	}{
		{"openwop/wait", idem.PolicyOpenWOP, ProfileOpenWOP, 0},
		{"openwop/409", idem.PolicyOpenWOP, ProfileOpenWOP, -1},
		{"erp/wait", idem.PolicyERP, ProfileSeed003, 0},
		{"erp/409", idem.PolicyERP, ProfileSeed003, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := idemAPI(t, tc.p, tc.wait)
			rs, err := Run(context.Background(), Config{
				BaseURL: srv.URL, APIKeys: []string{"idem-key-1", "idem-key-2"}, Profile: tc.profile,
				SlowBody: `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`,
				Stagger:  150 * time.Millisecond,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Status != Pass {
					t.Fatalf("idem.Guard:\n%s", dump(rs))
				}
			}
			t.Logf("\n%s", dump(rs))
		})
	}
}
