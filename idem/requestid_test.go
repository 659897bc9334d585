package idem_test

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// TestGuardAnswersCarryThePolicysRequestID: under a policy that names a
// request-id header and member (and renders neither itself: the OpenWOP
// envelope and headers), every answer the Guard builds — the first
// execution, a replay, a mismatch, an invalid key — carries the current
// request's id in that header, and every envelope it writes in that
// member, so a host need not mark them again.
func TestGuardAnswersCarryThePolicysRequestID(t *testing.T) {
	p := idem.PolicyOpenWOP
	p.Name = "traced"
	p.RequestIDHeader = "X-Trace-Id"
	p.RequestIDMember = "trace_id"
	e := newEnv(t, func(c *idem.Config) { c.Policy = p })
	h := &handler{status: 201, body: `{"trace_id":"","run":1}`}
	check := func(name string, ev events.APIGatewayV2HTTPRequest, status int, envelope bool) {
		t.Helper()
		r := e.call(h, ev)
		id := ev.RequestContext.RequestID
		if r.StatusCode != status || r.Headers["X-Trace-Id"] != id {
			t.Fatalf("%s: %d, X-Trace-Id %q, want %d and %q (%v)", name, r.StatusCode, r.Headers["X-Trace-Id"], status, id, r.Headers)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(r.Body), &m); err != nil || m["trace_id"] != id {
			t.Fatalf("%s: body %s, want trace_id %q", name, r.Body, id)
		}
		if envelope && m["error"] == nil {
			t.Fatalf("%s: body %s is not an envelope", name, r.Body)
		}
	}
	check("first execution", v2event("POST", "POST /runs", testKey, `{"a":1}`), 201, false)
	check("replay", v2event("POST", "POST /runs", testKey, `{"a":1}`), 201, false)
	check("mismatch", v2event("POST", "POST /runs", testKey, `{"a":2}`), 409, true)
	check("invalid key", v2event("POST", "POST /runs", "k", `{"a":1}`), 400, true)
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.Calls())
	}
}
