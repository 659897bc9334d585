package idem_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestStoredResponseHasNoAnswerHeaders: the stored response shares the
// handler's header map when it needs no change (Set-Cookie, names), and
// the headers the policy adds to a first execution's answer afterwards
// never reach the stored response: the replay has the handler's headers
// and its own answer's, byte-exact body, on every adapter's path here.
func TestStoredResponseHasNoAnswerHeaders(t *testing.T) {
	p := idem.PolicyOpenWOP
	p.Headers = func(h map[string][]string, a idem.Answer) {
		if a.Replay {
			h["X-Answer"] = []string{"replay"}
		} else {
			h["X-Answer"] = []string{"first"}
			h["Content-Type"] = append(h["Content-Type"], "first-only")
		}
	}
	e := newEnv(t, func(c *idem.Config) { c.Policy = p })
	h := &handler{hdrs: map[string]string{"Content-Type": "application/json", "X-Handler": "h"}}
	ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
	first := e.call(h, ev)
	if first.Headers["X-Answer"] != "first" || first.Headers["Content-Type"] != "application/json,first-only" {
		t.Fatalf("first answer headers %v", first.Headers)
	}
	replay := e.call(h, ev)
	if replay.Headers["X-Answer"] != "replay" || replay.Headers["Content-Type"] != "application/json" || replay.Headers["X-Handler"] != "h" || replay.Body != first.Body {
		t.Fatalf("replay %v %s; first %s", replay.Headers, replay.Body, first.Body)
	}
	if h.Calls() != 1 {
		t.Fatalf("%d runs", h.Calls())
	}
}
