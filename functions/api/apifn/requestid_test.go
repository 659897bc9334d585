package apifn

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// TestEveryAnswerCarriesThePolicysRequestID: under a policy that names a
// request-id header and member but renders neither itself (the OpenWOP
// envelope, no headers of its own), every answer carries the current
// request's id — the host's own (404, 401, a read route), the answers
// Layer 1 builds (a first execution, a mismatch, an invalid key), which
// the host does not mark again, and, with the Guard disabled, the
// handler's answer that ran outside a claim — and every envelope its
// member.
func TestEveryAnswerCarriesThePolicysRequestID(t *testing.T) {
	p := idem.PolicyOpenWOP
	p.Name = "traced"
	p.RequestIDHeader = "X-Trace-Id"
	p.RequestIDMember = "trace_id"
	for _, disabled := range []bool{false, true} {
		h := hostOf(t, runs.NewMemRuns(), idem.Config{Policy: p, Disabled: disabled}, nil).h
		check := func(name string, status int, envelope bool, method, path, tenant, key, body string) map[string]any {
			t.Helper()
			e := ev(method, path, tenant, key, body)
			e.RequestContext.RequestID = "req-" + name
			r, err := h.Handle(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			_ = json.Unmarshal([]byte(r.Body), &m)
			if r.StatusCode != status || r.Headers["X-Trace-Id"] != e.RequestContext.RequestID {
				t.Fatalf("disabled %v, %s: %d X-Trace-Id %q, want %d %q (%s)", disabled, name, r.StatusCode, r.Headers["X-Trace-Id"], status, e.RequestContext.RequestID, r.Body)
			}
			if envelope && (m["error"] == nil || m["trace_id"] != e.RequestContext.RequestID) {
				t.Fatalf("disabled %v, %s: envelope %s without trace_id %q", disabled, name, r.Body, e.RequestContext.RequestID)
			}
			return m
		}
		check("not-found", 404, true, "GET", "/nope", "acme", "", "")
		check("unauthenticated", 401, true, "POST", "/runs", "", key1, `{"workflowId":"conformance-noop"}`)
		run := check("first", 201, false, "POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop"}`)
		id, _ := run["runId"].(string)
		check("read", 200, false, "GET", "/runs/"+runs.ProjectID(id), "acme", "", "")
		if disabled {
			continue
		}
		check("mismatch", 409, true, "POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","inputs":{"n":2}}`)
		check("invalid-key", 400, true, "POST", "/runs", "acme", "k", `{"workflowId":"conformance-noop"}`)
	}
}
