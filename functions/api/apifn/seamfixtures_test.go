package apifn

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
)

// TestSeamFixturesOnlyUnderTheSeams: the seams-only fixtures
// (conformance-multi-node, conformance-cancellable, conformance-failure)
// are unknown to a handler wired as the deployed api function wires it
// (no ConformanceSeams): createRun refuses them 400 validation_error and
// creates nothing, and discovery's fixtures[] does not list them. Wired as
// `idemkit dev --conformance-seams` wires it, they are listed and created.
// Either way the api handler serves no seam path (durability, hold): 404.
func TestSeamFixturesOnlyUnderTheSeams(t *testing.T) {
	for _, seams := range []bool{false, true} {
		store := runs.NewMemRuns()
		f := hostOf(t, store, idem.Config{}, func(_ *fixture, c *Config) { c.Test.ConformanceSeams = seams })
		_, caps := f.do(t, ev("GET", "/.well-known/openwop", "", "", ""))
		listed := map[string]bool{}
		for _, x := range caps["fixtures"].([]any) {
			listed[x.(string)] = true
		}
		for i, wf := range webhook.SeamWorkflows {
			if listed[wf] != seams {
				t.Errorf("seams %v: fixtures[] lists %s: %v", seams, wf, listed[wf])
			}
			r, m := f.do(t, ev("POST", "/runs", "acme", "seam-fixture-key-0123456789-"+string(rune('a'+i)), `{"workflowId":"`+wf+`"}`))
			switch {
			case !seams && (r.StatusCode != 400 || m["error"] != "validation_error"):
				t.Errorf("deployed wiring created %s: %d %s", wf, r.StatusCode, r.Body)
			case seams && r.StatusCode != 201:
				t.Errorf("seams wiring refused %s: %d %s", wf, r.StatusCode, r.Body)
			}
		}
		// The seams themselves are never the api handler's: only idemkit
		// dev's gateway serves them, under the flag.
		for _, path := range []string{"/host/durability/kill", "/host/durability/bound", "/conformance/seams/sample/test/idempotency/hold"} {
			for _, m := range []string{"GET", "POST"} {
				if r, _ := f.do(t, ev(m, path, "acme", "", `{}`)); r.StatusCode != 404 {
					t.Errorf("seams %v: %s %s answered %d", seams, m, path, r.StatusCode)
				}
			}
		}
		if n := store.Len(); (n != 0) == !seams {
			t.Errorf("seams %v: %d runs created", seams, n)
		}
	}
}
