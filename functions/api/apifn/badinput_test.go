package apifn

import (
	"reflect"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestPollStreamModeRefusalNamesTheModes: GET /runs/{runId}/events/poll
// takes streamMode as GET /runs/{runId}/events does, and refuses a value
// outside its pattern with the same answer: 400 unsupported_stream_mode
// whose details.supported lists each mode this host serves (the registry
// row requires details.supported), decided before the run is read.
func TestPollStreamModeRefusalNamesTheModes(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	for _, id := range []string{r.ID, "acme/zzzzzzzzzzzzzzzzzzzz"} {
		path := "/runs/" + runs.ProjectID(id) + "/events/poll"
		for _, q := range []string{"streamMode=", "streamMode=foo", "streamMode=values,updates",
			"streamMode=updates,", "streamMode=debug&streamMode=debug", "afterSequence=0&streamMode=Updates"} {
			resp, m := f.do(t, eventsReq(path, "acme", q, ""))
			if resp.StatusCode != 400 || m["error"] != CodeUnsupportedStreamMode || m["message"] == "" ||
				resp.Headers["Content-Type"] != "application/json" {
				t.Fatalf("%s?%s: %d %s", path, q, resp.StatusCode, resp.Body)
			}
			details, _ := m["details"].(map[string]any)
			if sup, _ := details["supported"].([]any); !reflect.DeepEqual(sup, []any{"values", "updates", "messages", "debug"}) {
				t.Fatalf("%s?%s: details %v, want supported [values updates messages debug]", path, q, m["details"])
			}
		}
	}
}
