package apifn

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// TestSameJSONBodyWithAndWithoutContentTypeIsOneRequest: a route that
// reads its body as JSON whatever the Content-Type (createRun, cancelRun,
// forkRun) takes a body sent without one as the JSON it is, so under one
// Idempotency-Key the same body with and without a Content-Type, or
// spelled with other white space, is one request: the second is the
// first's replay, never 409 idempotency_key_mismatch, as it was when
// Layer 1 digested a body without a JSON Content-Type as raw bytes
// (RED_TEAM 246). The Guard is configured as the deployed stack's and
// `idemkit dev`'s are (kit.Layer1Routes).
func TestSameJSONBodyWithAndWithoutContentTypeIsOneRequest(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{Routes: kit.Layer1Routes()}, nil)
	bodies := []string{`{"workflowId":"conformance-noop","inputs":{"a":1}}`, `{ "inputs": {"a": 1}, "workflowId": "conformance-noop" }`}
	for i, first := range []string{"", "application/json"} {
		for j, second := range []string{"", "application/json"} {
			key := fmt.Sprintf("k%d%d-0123456789abcdefghij", i, j)
			e := ev("POST", "/runs", "acme", key, bodies[0])
			setType(&e, first)
			r1, _ := f.do(t, e)
			e = ev("POST", "/runs", "acme", key, bodies[1])
			setType(&e, second)
			r2, m2 := f.do(t, e)
			if r1.StatusCode != http.StatusCreated || r2.StatusCode != http.StatusCreated || r2.Headers["Openwop-Idempotent-Replay"] != "true" || r1.Body != r2.Body {
				t.Errorf("Content-Type %q then %q: %d then %d %v (replay %q), want the first 201 replayed",
					first, second, r1.StatusCode, r2.StatusCode, m2, r2.Headers["Openwop-Idempotent-Replay"])
			}
		}
	}
}

// setType sets e's Content-Type, or removes it for "".
func setType(e *events.APIGatewayV2HTTPRequest, ct string) {
	for k := range e.Headers {
		if http.CanonicalHeaderKey(k) == "Content-Type" {
			delete(e.Headers, k)
		}
	}
	if ct != "" {
		e.Headers["Content-Type"] = ct
	}
}

// TestEveryJSONRouteIsJSONToLayer1: every route whose handler reads its
// body as JSON text whatever the Content-Type (Route.jsonBody, noBody) is
// JSON to the Guard in the host's Layer-1 options, so its key binds the
// body's JSON, not its bytes (RED_TEAM 246).
func TestEveryJSONRouteIsJSONToLayer1(t *testing.T) {
	routes := kit.Layer1Routes()
	for _, r := range Routes {
		if r.Idempotent && (r.jsonBody || r.noBody) && !routes[r.Scope()].JSON {
			t.Errorf("%s: not JSON to Layer 1 (kit.Layer1Routes)", r.Scope())
		}
	}
}
