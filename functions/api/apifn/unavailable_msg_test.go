package apifn

import (
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// downGetRuns is a run store whose Get and Cancel fail as a throttled
// DynamoDB call does once the SDK's retries are spent.
type downGetRuns struct{ throttledRuns }

func (s *downGetRuns) Get(ctx context.Context, id string) (runs.Run, error) {
	return runs.Run{}, s.fail()
}

// TestStoreUnavailableMessageNamesTheKeyOnlyWhenSent: the 503
// idemkit.store_unavailable of a request that carried an Idempotency-Key
// tells it to retry with the same key; a GET, or a write sent without a
// key, is told to retry after Retry-After and is not told about a key it
// never sent.
func TestStoreUnavailableMessageNamesTheKeyOnlyWhenSent(t *testing.T) {
	rs := &downGetRuns{throttledRuns{MemRuns: runs.NewMemRuns(), down: true}}
	f := hostOf(t, rs, idem.Config{}, nil)
	f.runs = rs.MemRuns
	r := f.newRun(t, "acme")
	p := "/runs/" + runs.ProjectID(r.ID)
	for _, c := range []struct {
		method, path, key, body string
		keyed                   bool
	}{
		{"GET", p, "", "", false},
		{"POST", p + "/cancel", "", `{}`, false},
		{"POST", p + "/cancel", key1, `{}`, true},
	} {
		resp, m := f.do(t, ev(c.method, c.path, "acme", c.key, c.body))
		msg, _ := m["message"].(string)
		if resp.StatusCode != 503 || m["error"] != idem.CodeStoreUnavailable || resp.Headers[idem.HeaderRetryAfter] == "" ||
			strings.Contains(msg, "Idempotency-Key") != c.keyed || !strings.Contains(msg, "Retry-After") {
			t.Errorf("%s %s (key %q): %d %v", c.method, c.path, c.key, resp.StatusCode, m)
		}
	}
}
