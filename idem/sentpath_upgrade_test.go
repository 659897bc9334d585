package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// The fingerprints the code before RED_TEAM 533 wrote for POST {"qty":1}
// on a ServeMux route POST /orders/{id}, computed on that code, for the
// request targets below as a net/http server hands them over (none
// rewritten). pinSentUmlaut is the one of /orders/ä sent as raw UTF-8
// and of /orders/%C3%A4 alike.
const (
	pinSentUmlaut = "request-sha256-v1:CSp12PW7H1actTAmzxkV5dsLbx7gn2cGbGPDZ9hSsW0"
	pinSentBar    = "request-sha256-v1:WdCQl4ALn-rk5tWKSiWb_CubSynCi5o_aJuN9XbsBNg"
	pinSentBraces = "request-sha256-v1:vYRGQVvw27tVAFrUprWsQks_vQ615H0dj_7PP8Zc3xU"
)

// TestUnrewrittenPathKeepsItsFingerprint pins, to the values computed on
// the code before RED_TEAM 533, the fingerprints of requests whose path no
// handler before the Guard rewrote but whose request target holds bytes
// net/url escapes when it spells the path again (raw UTF-8, '|', braces):
// the request's URL keeps the path as sent (RawPath), so nothing was
// rewritten and the path the client sent is not in the fingerprint. Their
// records, written before 533, replay after it. Before the fix each was
// taken for a rewritten path (the target compared with the path spelt
// again, %C3%A4 for ä), a new fingerprint: a retry across the upgrade was
// 409 idempotency_key_mismatch, and the same request with ä escaped was
// 409 under the key of the one with ä raw. A path a handler did rewrite,
// RawPath with it (http.StripPrefix), still has the sent path in its
// fingerprint; one whose Path alone was set, RawPath left as sent, too.
func TestUnrewrittenPathKeepsItsFingerprint(t *testing.T) {
	digest := func(t *testing.T, target string, wrap func(http.Handler) http.Handler, edit func(*http.Request)) string {
		t.Helper()
		rec := &digestRecorder{}
		e := newEnv(t, func(c *idem.Config) {
			c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
			rec.Store = c.Store
			c.Store = rec
		})
		mux := http.NewServeMux()
		mux.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })
		var h http.Handler = e.guard.Middleware(mux)
		if wrap != nil {
			h = wrap(h)
		}
		req := httptest.NewRequest("POST", target, strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, testKey)
		if edit != nil {
			edit(req)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 201 || len(rec.digests) != 1 {
			t.Fatalf("%s: %d %s, digests %q", target, w.Code, w.Body, rec.digests)
		}
		return rec.digests[0]
	}
	for _, c := range []struct{ target, want string }{
		{"/orders/\u00e4", pinSentUmlaut},
		{"/orders/%C3%A4", pinSentUmlaut},
		{"/orders/a|b", pinSentBar},
		{"/orders/{x}", pinSentBraces},
	} {
		if got := digest(t, c.target, nil, nil); got != c.want {
			t.Errorf("%s, not rewritten: fingerprint %s, want the earlier code's %s", c.target, got, c.want)
		}
	}
	strip := func(h http.Handler) http.Handler { return http.StripPrefix("/a", h) }
	if got := digest(t, "/a/orders/\u00e4", strip, nil); got == pinSentUmlaut {
		t.Errorf("/a/orders/ä behind http.StripPrefix: the unrewritten path's fingerprint, want the sent path in it")
	}
	pathOnly := func(r *http.Request) { r.URL.Path = strings.TrimPrefix(r.URL.Path, "/a") }
	if got := digest(t, "/a/orders/\u00e4", nil, pathOnly); got == pinSentUmlaut {
		t.Errorf("/a/orders/ä with its Path alone rewritten: the unrewritten path's fingerprint, want the sent path in it")
	}
}
