package idem_test

import (
	"context"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestHandler408IsRetriedNotReplayed: a handler's own 408 Request Timeout
// (a timeout middleware inside the Guard) tells the client it may repeat
// the request (RFC 9110 §15.5.9); under the OpenWOP default it is retried
// like a 429, never replayed as the key's final answer, and the retry runs
// the handler and its outcome is the one replayed.
func TestHandler408IsRetriedNotReplayed(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{status: 408, body: `{"error":"request_timeout","message":"x"}`}
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	if r := e.call(h, ev); r.StatusCode != 408 {
		t.Fatalf("first: %+v", r)
	}
	rec, found, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
	if !found || rec.State != idem.StateRetryableFailure || rec.Response != nil {
		t.Fatalf("a 408 left %+v found=%v, want a retryable record with no response", rec, found)
	}
	h.status, h.body = 201, `{"done":true}`
	r := e.call(h, ev)
	if r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "" || h.Calls() != 2 {
		t.Fatalf("the retry after a 408 did not run the handler: calls=%d %+v", h.Calls(), r)
	}
	r = e.call(h, ev)
	if r.StatusCode != 201 || r.Body != `{"done":true}` || r.Headers["Openwop-Idempotent-Replay"] != "true" || h.Calls() != 2 {
		t.Fatalf("the outcome after a 408 is not the one replayed: calls=%d %+v", h.Calls(), r)
	}
}
