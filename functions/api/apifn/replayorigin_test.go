package apifn

import (
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// TestReplayLinksStayOnTheRequestOrigin: one API reached under two domains
// (API Gateway's own and a custom domain), a key's request to the first
// and its retry to the second. The retry is the key's replay (the same
// run, OpenWOP-Idempotent-Replay: true), and its links (Location,
// statusUrl, eventsUrl) resolve under the origin the retry was made to
// (runs.md §Response: a link naming a different host is non-conformant),
// on createRun, retryRun and forkRun alike. A replay to the first domain
// is the first answer byte for byte.
func TestReplayLinksStayOnTheRequestOrigin(t *testing.T) {
	f := newFixture(t)
	failed := sourceRun(t, f, "acme", runs.StatusFailed)
	done := sourceRun(t, f, "acme", runs.StatusCompleted)
	at := func(e events.APIGatewayV2HTTPRequest, domain string) events.APIGatewayV2HTTPRequest {
		e.RequestContext.DomainName = domain
		return e
	}
	cases := []struct {
		op    string
		req   events.APIGatewayV2HTTPRequest
		links []string
	}{
		{"createRun", ev("POST", "/runs", "acme", "k-origin-create-0123456789", `{"workflowId":"conformance-noop"}`), []string{"statusUrl", "eventsUrl"}},
		{"retryRun", ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", "acme", "k-origin-retry-0123456789", ""), []string{"statusUrl", "eventsUrl"}},
		{"forkRun", ev("POST", "/runs/"+runs.ProjectID(done.ID)+":fork", "acme", "k-origin-fork-0123456789", `{"mode":"replay","fromSeq":3}`), []string{"eventsUrl"}},
	}
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			first, m1 := f.do(t, at(c.req, "abc123.execute-api.eu-west-1.amazonaws.com"))
			if first.StatusCode != 201 {
				t.Fatalf("first: %d %s", first.StatusCode, first.Body)
			}
			again, _ := f.do(t, at(c.req, "abc123.execute-api.eu-west-1.amazonaws.com"))
			if again.Body != first.Body || again.Headers["Location"] != first.Headers["Location"] {
				t.Fatalf("a replay to the same origin is not the first answer:\n%s\n%s", again.Body, first.Body)
			}
			other, m2 := f.do(t, at(c.req, "api.example.com"))
			if other.StatusCode != 201 || other.Headers[idem.HeaderOpenWOPReplay] != "true" || m2["runId"] != m1["runId"] {
				t.Fatalf("the retry to the other domain is no replay of the key's run: %d %v %s", other.StatusCode, other.Headers, other.Body)
			}
			base := "https://api.example.com/runs/" + runs.ProjectID(m1["runId"].(string))
			if got := other.Headers["Location"]; got != base {
				t.Errorf("Location %q, want %q", got, base)
			}
			for _, l := range c.links {
				got, _ := m2[l].(string)
				if !strings.HasPrefix(got, base) {
					t.Errorf("%s %q is not under the request's origin (want %s…)", l, got, base)
				}
			}
			if m2["eventsUrl"] != base+"/events" {
				t.Errorf("eventsUrl %v, want %s/events", m2["eventsUrl"], base)
			}
			for k, v := range m1 {
				if k == "statusUrl" || k == "eventsUrl" {
					continue
				}
				if m2[k] != v {
					t.Errorf("the replay's %s is %v, the first answer's %v", k, m2[k], v)
				}
			}
		})
	}
}
