package apifn

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/header"
)

// TestLayer1UnauthenticatedCarriesTheChallenge: under the commerce and
// ERP policies Layer 1 scopes a key by parts of the credential
// (namespace and worker; client, company and organisation); a key whose
// credential lacks them is refused 401 unauthenticated by Layer 1 itself.
// That 401, like the host's own, names the scheme the client must use
// (RFC 9110 §11.6.1: a 401 MUST carry WWW-Authenticate), keyed or not
// and on every idempotent route.
func TestLayer1UnauthenticatedCarriesTheChallenge(t *testing.T) {
	for _, name := range []string{"commerce", "erp"} {
		pol, err := idem.PolicyNamed(name)
		if err != nil {
			t.Fatal(err)
		}
		f := hostOf(t, runs.NewMemRuns(), idem.Config{Policy: pol}, nil)
		run := sourceRun(t, f, "acme", runs.StatusFailed)
		p := "/runs/" + runs.ProjectID(run.ID)
		for _, c := range []struct{ path, key, body string }{
			{"/runs", "k-challenge-0123456789ab", `{"workflowId":"conformance-noop"}`},
			{"/runs", "", `{"workflowId":"conformance-noop"}`},
			{p + "/retry", "k-challenge-0123456789ac", ""},
			{p + "/cancel", "k-challenge-0123456789ad", `{}`},
		} {
			r, m := f.do(t, ev(http.MethodPost, c.path, "acme", c.key, c.body))
			if r.StatusCode != http.StatusUnauthorized {
				if c.key != "" {
					t.Errorf("%s: POST %s (key %q): %d %v, want Layer 1's 401", name, c.path, c.key, r.StatusCode, m)
				}
				continue // unkeyed: Layer 1 does not scope it, nothing refuses it
			}
			if m["error"] != "unauthenticated" || header.First(r.Headers, "WWW-Authenticate") != wwwAuthenticate {
				t.Errorf("%s: POST %s (key %q): 401 %v, WWW-Authenticate %q, want %q", name, c.path, c.key, m, header.First(r.Headers, "WWW-Authenticate"), wwwAuthenticate)
			}
		}
	}
}
