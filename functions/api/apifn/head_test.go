package apifn

import (
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestHeadAnswersCarryNoContent: a HEAD request is answered as GET would
// be, status and header fields alike, without the content (RFC 9110
// §9.3.2: the server MUST NOT send content in the response to HEAD), on
// every route that serves HEAD and on its refusals (404, 400, 403, 401).
func TestHeadAnswersCarryNoContent(t *testing.T) {
	f := newFixture(t)
	r, m := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop","inputs":{}}`))
	if r.StatusCode != 201 {
		t.Fatalf("create: %d %v", r.StatusCode, m)
	}
	id, _ := m["runId"].(string)
	run := "/runs/" + runs.ProjectID(id)
	cases := []struct{ path, tenant string }{
		{run, "acme"},
		{run + "/effects", "acme"},
		{run + "/events", "acme"},
		{run + "/events/poll", "acme"},
		{"/inbox", "acme"},
		{"/host/effect-seams", "acme"},
		{"/.well-known/openwop", ""},
		{"/openapi.json", ""},
		{"/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz", "acme"},   // 404
		{"/runs/short", "acme"},                         // 400
		{"/runs/globex~2Fzzzzzzzzzzzzzzzzzzzz", "acme"}, // 403
		{run, ""},         // 401
		{"/runs", "acme"}, // 404, unadvertised listRuns
	}
	for _, c := range cases {
		get, _ := f.do(t, ev(http.MethodGet, c.path, c.tenant, "", ""))
		head, _ := f.do(t, ev(http.MethodHead, c.path, c.tenant, "", ""))
		if head.StatusCode != get.StatusCode {
			t.Errorf("HEAD %s: %d, GET %d", c.path, head.StatusCode, get.StatusCode)
		}
		if head.Body != "" || head.IsBase64Encoded {
			t.Errorf("HEAD %s (%d): content %q, want none", c.path, head.StatusCode, head.Body)
		}
		if get.Body == "" {
			t.Errorf("GET %s (%d): no content", c.path, get.StatusCode)
		}
		for _, name := range []string{"Content-Type", "ETag", "Cache-Control", "Vary", "Allow", "WWW-Authenticate", "OpenWOP-Version"} {
			if head.Headers[name] != get.Headers[name] {
				t.Errorf("HEAD %s: %s %q, GET %q", c.path, name, head.Headers[name], get.Headers[name])
			}
		}
	}
}
