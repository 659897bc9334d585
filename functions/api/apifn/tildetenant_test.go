package apifn

import (
	"fmt"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestATenantHoldingATildeMintsNoRunID pins RED_TEAM 268: a credential issued
// before its tenant's `~` was refused (idemkit apikey create, idemkit dev
// --api-key) mints no run id (createRun, retryRun, forkRun answer 403
// forbidden, reason tenant_not_mintable, before Layer 1 claims the key),
// while the runs it already has stay readable in every id form.
func TestATenantHoldingATildeMintsNoRunID(t *testing.T) {
	f := newFixture(t)
	const tenant = "t~2Fx"
	old := sourceRun(t, f, tenant, runs.StatusFailed)
	before := f.runs.Len()
	mints := map[string]string{
		"createRun": "/runs",
		"retryRun":  "/runs/" + runs.ProjectID(old.ID) + "/retry",
		"forkRun":   "/runs/" + runs.ProjectID(old.ID) + ":fork",
	}
	bodies := map[string]string{"createRun": `{"workflowId":"conformance-noop"}`, "retryRun": "", "forkRun": `{"mode":"replay"}`}
	for op, path := range mints {
		for i, key := range []string{fmt.Sprintf("k-tilde-tenant-%s-0123456789", op), ""} {
			resp, m := f.do(t, ev("POST", path, tenant, key, bodies[op]))
			details, _ := m["details"].(map[string]any)
			if resp.StatusCode != 403 || m["error"] != "forbidden" || details["reason"] != "tenant_not_mintable" {
				t.Errorf("%s (%d): %d %s, want 403 forbidden, reason tenant_not_mintable", op, i, resp.StatusCode, resp.Body)
			}
			if msg, _ := m["message"].(string); !strings.Contains(msg, "A-Z a-z 0-9 . _ -") {
				t.Errorf("%s: message %q does not name the characters a tenant may hold", op, msg)
			}
		}
	}
	if n := f.runs.Len(); n != before {
		t.Errorf("the runs store holds %d runs, want %d (nothing minted)", n, before)
	}
	for _, path := range []string{"/runs/" + runs.ProjectID(old.ID), "/runs/" + strings.Replace(old.ID, "/", "%2F", 1), "/runs/" + old.ID} {
		resp, m := f.do(t, ev("GET", path, tenant, "", ""))
		if resp.StatusCode != 200 || m["runId"] != old.ID {
			t.Errorf("GET %s: %d %s, want 200 naming %s", path, resp.StatusCode, resp.Body, old.ID)
		}
	}
}
