package apifn

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/header"
)

// TestOneKeyOnEveryIdempotentRouteIsARecordPerRoute: the idempotency
// chapter keys a Layer-1 record by (tenant, endpoint, key). One tenant
// sends one Idempotency-Key on every idempotent route of the table that
// takes a run (and createRun and bulkCancelRuns), one after the other:
// each request runs (it is neither another route's replay nor 409
// idempotency_key_mismatch), and the key sent again on each route is that
// route's own replay, byte for byte, with OpenWOP-Idempotent-Replay.
func TestOneKeyOnEveryIdempotentRouteIsARecordPerRoute(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const key = "one-key-on-every-route-000001"
	body := `{"workflowId":"conformance-noop"}`
	mk := func(to runs.Status) string {
		t.Helper()
		_, m := f.do(t, ev("POST", "/runs", "acme", "", body))
		id, _ := m["runId"].(string)
		if to != runs.StatusPending {
			if _, err := f.runs.Transition(ctx, id, []runs.Status{runs.StatusPending}, to, "x", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	failed, running, toCancel, toBulk := mk(runs.StatusFailed), mk(runs.StatusRunning), mk(runs.StatusRunning), mk(runs.StatusRunning)
	steps := []struct {
		op, pattern, id, body string
		status                int
	}{
		{"createRun", "/runs", "", body, http.StatusCreated},
		{"forkRun", "/runs/{runId}:fork", failed, `{"mode":"replay"}`, http.StatusCreated},
		{"retryRun", "/runs/{runId}/retry", failed, "", http.StatusCreated},
		{OpPauseRun, "/runs/{runId}:pause", running, `{}`, http.StatusAccepted},
		{OpResumeRun, "/runs/{runId}:resume", running, `{}`, http.StatusAccepted},
		{"cancelRun", "/runs/{runId}/cancel", toCancel, `{}`, http.StatusOK},
		{"bulkCancelRuns", "/runs:bulk-cancel", "", `{"runIds":["` + toBulk + `"]}`, http.StatusOK},
	}
	covered := map[string]bool{}
	first := map[string]string{}
	for _, s := range steps {
		covered[s.op] = true
		path := strings.Replace(s.pattern, "{runId}", runs.ProjectID(s.id), 1)
		r, _ := f.do(t, ev("POST", path, "acme", key, s.body))
		if r.StatusCode != s.status || header.First(r.Headers, "OpenWOP-Idempotent-Replay") == "true" {
			t.Errorf("%s under a key the earlier routes used: %d %v %s, want %d, run (no replay, no mismatch)", s.op, r.StatusCode, r.Headers, r.Body, s.status)
		}
		for op, b := range first {
			if r.Body == b {
				t.Errorf("%s under the key answered %s's answer: %s", s.op, op, r.Body)
			}
		}
		first[s.op] = r.Body
	}
	// Each route's record is its own: the key again is that route's replay.
	for _, s := range steps {
		path := strings.Replace(s.pattern, "{runId}", runs.ProjectID(s.id), 1)
		r, _ := f.do(t, ev("POST", path, "acme", key, s.body))
		if r.StatusCode != s.status || header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "true" || r.Body != first[s.op] {
			t.Errorf("%s under the key again: %d %v %s, want the replay of %s", s.op, r.StatusCode, r.Headers, r.Body, first[s.op])
		}
	}
	for _, r := range Routes {
		if r.Idempotent && !r.Public && !strings.HasPrefix(r.Pattern, "/inbox/") && r.Op != OpLiveWorkOrder && !covered[r.Op] {
			t.Errorf("idempotent route %s %s (%s) is not covered", r.Method, r.Pattern, r.Op)
		}
	}
}
