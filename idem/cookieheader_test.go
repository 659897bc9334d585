package idem_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestDeclaredCookieHeaderUnderHTTPAPI: an HTTP API (payload 2.0) event
// carries the request's Cookie header in its cookies list, not among its
// headers; a route that declares Cookie among its fingerprint headers
// has it in the fingerprint all the same: the same key with another
// cookie is 409 idempotency_key_mismatch, never the first answer
// replayed; the same cookies replay.
func TestDeclaredCookieHeaderUnderHTTPAPI(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.Routes = map[string]idem.Route{"POST /runs": {Headers: []string{"Cookie"}}}
	})
	h := &handler{}
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	ev.Cookies = []string{"currency=EUR", "lang=de"}
	if r := e.call(h, ev); r.StatusCode != 201 {
		t.Fatalf("first: %+v", r)
	}
	if r := e.call(h, ev); r.Headers[idem.HeaderOpenWOPReplay] != "true" || h.Calls() != 1 {
		t.Fatalf("same cookies: %+v", r)
	}
	ev.Cookies = []string{"currency=USD", "lang=de"}
	if r := e.call(h, ev); r.StatusCode != 409 || h.Calls() != 1 {
		t.Fatalf("another cookie under the same key: %d %v %s (runs %d)", r.StatusCode, r.Headers, r.Body, h.Calls())
	}
}
