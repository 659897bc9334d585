package apifn

import "testing"

// TestUnadvertisedOperationsAre404: the OpenWOP run surface's operations
// this host does not serve answer 404 not_found, as runs.md requires of a
// gated operation a host does not advertise: listRuns (GET /runs, gated on
// runList; the OpenAPI document: "404 not_found when unadvertised") and a
// run's sub-resources other than the ones served (annotations, ancestry,
// compensation, eval-summary), whatever the method, with or without a
// credential; never 405 nor a 400 about the runId, which is valid.
func TestUnadvertisedOperationsAre404(t *testing.T) {
	f := newFixture(t)
	const run = "/runs/acme~2Fabcdefghijklmnopqr"
	for _, c := range []struct{ method, path string }{
		{"GET", "/runs"},
		{"GET", run + "/annotations"},
		{"POST", run + "/annotations"},
		{"GET", run + "/ancestry"},
		{"GET", run + "/compensation"},
		{"GET", run + "/eval-summary"},
		{"GET", "/runs/acme%2Fabcdefghijklmnopqr/annotations"},
	} {
		for _, tenant := range []string{"acme", ""} {
			r, m := f.do(t, ev(c.method, c.path, tenant, "", ""))
			if r.StatusCode != 404 || m["error"] != "not_found" || m["message"] == nil || r.Headers["Allow"] != "" {
				t.Errorf("%s %s (tenant %q): %d %v Allow %q, want 404 not_found", c.method, c.path, tenant, r.StatusCode, m, r.Headers["Allow"])
			}
		}
	}
	// The runs served in their split form, <tenant>/<opaque>, still are.
	if r, m := f.do(t, ev("GET", "/runs/acme/abcdefghijklmnopqr", "acme", "", "")); r.StatusCode != 404 || m["error"] != "not_found" {
		t.Errorf("GET of an unknown run in split form: %d %v, want 404 not_found (no such run)", r.StatusCode, m)
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`)); r.StatusCode != 201 {
		t.Fatalf("createRun: %d %v", r.StatusCode, m)
	} else if id, _ := m["runId"].(string); id == "" {
		t.Fatalf("createRun: no runId in %v", m)
	} else if r, m := f.do(t, ev("GET", "/runs/"+id, "acme", "", "")); r.StatusCode != 200 {
		t.Errorf("GET /runs/%s (split form): %d %v, want 200", id, r.StatusCode, m)
	}
}

// TestHeadOfAnUnadvertisedGetIs404: HEAD is answered as GET would be
// (RFC 9110 §9.3.2), so HEAD /runs, listRuns' path, is the 404 not_found
// of GET /runs, not a 405 naming POST (RED_TEAM 243).
func TestHeadOfAnUnadvertisedGetIs404(t *testing.T) {
	f := newFixture(t)
	for _, tenant := range []string{"acme", ""} {
		get, _ := f.do(t, ev("GET", "/runs", tenant, "", ""))
		head, _ := f.do(t, ev("HEAD", "/runs", tenant, "", ""))
		if head.StatusCode != get.StatusCode || head.StatusCode != 404 || head.Headers["Allow"] != "" {
			t.Errorf("HEAD /runs (tenant %q): %d Allow %q; GET: %d, want both 404 without Allow", tenant, head.StatusCode, head.Headers["Allow"], get.StatusCode)
		}
	}
}
