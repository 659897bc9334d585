package apifn

import (
	"testing"
)

// TestForceEngineVersionForbidden: OpenWOP-Force-Engine-Version is for
// test keys only; this host has none (it advertises no
// testing.forceEngineVersionRange), so createRun with the header, whatever
// its value, is 403 force_engine_version_forbidden and creates nothing.
// The 403 is decided before the Layer-1 claim (a 403 is never cached): the
// same key without the header then creates the run.
func TestForceEngineVersionForbidden(t *testing.T) {
	f := newFixture(t)
	for i, v := range []string{"1", "0", "2", "x"} {
		key := "k-force-engine-" + string(rune('a'+i)) + "-0123456789abc"
		e := ev("POST", "/runs", "acme", key, `{"workflowId":"conformance-noop"}`)
		e.Headers["openwop-force-engine-version"] = v
		r, m := f.do(t, e)
		if r.StatusCode != 403 || m["error"] != CodeForceEngineVersionForbidden || m["message"] == "" {
			t.Fatalf("OpenWOP-Force-Engine-Version: %s: %d %s, want 403 %s", v, r.StatusCode, r.Body, CodeForceEngineVersionForbidden)
		}
		if n := f.runs.Len(); n != 0 {
			t.Fatalf("OpenWOP-Force-Engine-Version: %s created %d runs", v, n)
		}
		if r, _ := f.do(t, ev("POST", "/runs", "acme", key, `{"workflowId":"conformance-noop"}`)); r.StatusCode != 201 {
			t.Fatalf("the same key without the header: %d %s (the 403 was kept as the key's answer)", r.StatusCode, r.Body)
		}
		f = newFixture(t)
	}
	reg := registryRow(t, CodeForceEngineVersionForbidden)
	if reg.HTTPStatus != 403 {
		t.Fatalf("registry: %s is %d", CodeForceEngineVersionForbidden, reg.HTTPStatus)
	}
}
