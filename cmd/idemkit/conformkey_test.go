package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestConformWithRefusedKeySaysSo: when the API refuses the --api-key
// (401 or 403 on every scenario: a key mistyped, one of another stack),
// every scenario fails as before (exit 1, each FAIL line kept), and stderr
// says once that the key was refused and how to get one, instead of
// leaving seven failures to read as the API's. Failed before the fix: no
// such line.
func TestConformWithRefusedKeySaysSo(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"error":"unauthenticated","message":"The request has no valid credential."}`))
		}))
		var out, errb bytes.Buffer
		exit := run(context.Background(), []string{"conform", "--api-key", "idk_wrong1", "--api-key", "idk_wrong2", srv.URL}, &out, &errb)
		srv.Close()
		const want = "idemkit conform: every scenario failed on the API's refusal of the credential (401 or 403): is --api-key a key this API accepts? ('idemkit dev' prints two; 'idemkit apikey create' mints one)"
		if exit != 1 || !strings.Contains(out.String(), "0 passed, 7 failed") || !strings.Contains(errb.String(), want) {
			t.Errorf("%d: exit %d, stdout %q, stderr %q; want 1, the FAIL lines and %q", code, exit, out.String(), errb.String(), want)
		}
	}
}
