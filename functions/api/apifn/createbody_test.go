package apifn

import "testing"

// TestCreateRunBodyIsClosed: createRun refuses a body member outside the
// createRun and RunOptions fields with 400 validation_error naming it, and
// over-limit tags likewise; neither is cached (the same key then creates a
// run) and neither creates a run.
func TestCreateRunBodyIsClosed(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","zzz":1}`, "zzz"},
		{`{"workflowID":"conformance-noop"}`, "workflowID"},
		{`{"workflowId":"conformance-noop","tags":"one"}`, "tags"},
	} {
		r, m := f.do(t, ev("POST", "/runs", "acme", key1, c.body))
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != 400 || m["error"] != "validation_error" || d["field"] != c.field {
			t.Errorf("%s: %d %v, want 400 validation_error on %s", c.body, r.StatusCode, m, c.field)
		}
	}
	if f.runs.Len() != 0 {
		t.Fatalf("%d runs after the refusals", f.runs.Len())
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","tags":["a"],"metadata":{"k":"v"}}`)); r.StatusCode != 201 {
		t.Fatalf("the same key after the 400s: %d %v", r.StatusCode, m)
	}
}
