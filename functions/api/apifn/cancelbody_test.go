package apifn

import (
	"context"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestCancelBodyIsItsSchema: cancelRun's body is optional; when there is
// one it is the operation's schema, a JSON object whose reason, if present,
// is a string (other members are allowed: the schema is open). A body of
// another media type is 415 unsupported_media_type; null, an array, a
// scalar, invalid JSON or a reason that is not a string are 400
// validation_error (details.field reason for the latter). A refused cancel
// leaves the run as it was, with or without an Idempotency-Key, and is not
// the key's answer: the same key with a good body then cancels the run.
func TestCancelBodyIsItsSchema(t *testing.T) {
	f := newFixture(t)
	newRun := func(t *testing.T) (id, path string) {
		t.Helper()
		_, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
		id = m["runId"].(string)
		return id, "/runs/" + runs.ProjectID(id) + "/cancel"
	}
	status := func(t *testing.T, id string) runs.Status {
		t.Helper()
		r, err := f.runs.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	refused := []struct {
		name, contentType, body string
		status                  int
		code, field             string
	}{
		{"null", "", `null`, 400, "validation_error", ""},
		{"array", "", `[]`, 400, "validation_error", ""},
		{"string", "", `"stop"`, 400, "validation_error", ""},
		{"number", "", `1`, 400, "validation_error", ""},
		{"not JSON", "", `{`, 400, "validation_error", ""},
		{"whitespace only", "", "  \n ", 400, "validation_error", ""},
		{"reason a number", "", `{"reason":1}`, 400, "validation_error", "reason"},
		{"reason null", "", `{"reason":null}`, 400, "validation_error", "reason"},
		{"text/plain", "text/plain", `{"reason":"x"}`, 415, "unsupported_media_type", ""},
		{"form", "application/x-www-form-urlencoded", `reason=x`, 415, "unsupported_media_type", ""},
	}
	for i, c := range refused {
		for _, key := range []string{"", "k-cancelbody-" + string(rune('a'+i)) + "-0123456789abcdef"} {
			id, path := newRun(t)
			e := ev("POST", path, "acme", key, c.body)
			if c.contentType != "" {
				e.Headers["content-type"] = c.contentType
			}
			r, m := f.do(t, e)
			if r.StatusCode != c.status || m["error"] != c.code {
				t.Fatalf("%s (key %q): %d %s, want %d %s", c.name, key, r.StatusCode, r.Body, c.status, c.code)
			}
			if d, _ := m["details"].(map[string]any); c.field != "" && (d == nil || d["field"] != c.field) {
				t.Fatalf("%s: details %v, want field %s", c.name, m["details"], c.field)
			}
			if st := status(t, id); st != runs.StatusPending {
				t.Fatalf("%s (key %q): a refused cancel moved the run to %s", c.name, key, st)
			}
			if key == "" {
				continue
			}
			if r, m := f.do(t, ev("POST", path, "acme", key, `{"reason":"ok"}`)); r.StatusCode != 200 || m["status"] != "cancelled" {
				t.Fatalf("%s: the same key with a good body: %d %s (the refusal was kept as the key's answer)", c.name, r.StatusCode, r.Body)
			}
		}
	}
	accepted := []struct{ name, contentType, body string }{
		{"no body", "", ""},
		{"empty form", "application/x-www-form-urlencoded", ""},
		{"empty object", "", `{}`},
		{"reason", "", `{"reason":"no longer needed"}`},
		{"another member", "", `{"reason":"x","ticket":"T-1"}`},
		{"charset", "application/json; charset=utf-8", `{"reason":"x"}`},
	}
	for _, c := range accepted {
		id, path := newRun(t)
		e := ev("POST", path, "acme", "", c.body)
		if c.contentType != "" {
			e.Headers["content-type"] = c.contentType
		}
		if r, m := f.do(t, e); r.StatusCode != 200 || m["status"] != "cancelled" || status(t, id) != runs.StatusCancelled {
			t.Fatalf("%s: %d %s", c.name, r.StatusCode, r.Body)
		}
	}
}
