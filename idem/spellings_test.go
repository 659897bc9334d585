package idem_test

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestHeaderUnderTwoSpellingsFingerprintsOneWay: a Lambda event whose
// header map holds a header the fingerprint reads (a method-override
// header, Content-Type) under two spellings with different values (an
// event built by hand, or an integration that does not fold names) is
// fingerprinted the same on every send: each send after the first is its
// replay, never `409 idempotency_key_mismatch` by the luck of Go's map
// order. Failed before RED_TEAM 382: about half the sends were refused.
func TestHeaderUnderTwoSpellingsFingerprintsOneWay(t *testing.T) {
	for _, c := range []struct{ name, a, b string }{
		{"a method-override header", "X-HTTP-Method-Override", "x-http-method-override"},
		{"Content-Type", "Content-Type", "content-type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			h := &handler{status: 200}
			send := func() int {
				ev := v2event(http.MethodPost, "POST /docs/{id}", testKey, `{"a":1}`)
				ev.PathParameters = map[string]string{"id": "d1"}
				ev.Headers[c.a], ev.Headers[c.b] = "application/json", "application/merge-patch+json"
				if c.a != "Content-Type" {
					ev.Headers[c.a], ev.Headers[c.b] = "DELETE", "PUT"
				}
				r := e.call(h, ev)
				if r.Headers[idem.HeaderOpenWOPReplay] == "true" {
					return -r.StatusCode
				}
				return r.StatusCode
			}
			first := send()
			if first != 200 {
				t.Fatalf("first: %d", first)
			}
			for i := 1; i < 32; i++ {
				if got := send(); got != -200 {
					t.Fatalf("send %d: %d (negative: a replay); want the first answer's replay every time", i, got)
				}
			}
			if h.Calls() != 1 {
				t.Fatalf("the handler ran %d times, want once", h.Calls())
			}
		})
	}
}
