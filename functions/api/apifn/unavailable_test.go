package apifn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// throttledRuns is a run store whose Transition and Get fail the way a
// throttled DynamoDB call does once the SDK's retries are spent (or with
// err, when set).
type throttledRuns struct {
	*runs.MemRuns
	down bool
	err  error
}

func (s *throttledRuns) fail() error {
	if s.err != nil {
		return s.err
	}
	return fmt.Errorf("host: update run: %w", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate of requests exceeds the allowed throughput."})
}

func (s *throttledRuns) Transition(ctx context.Context, id string, from []runs.Status, to runs.Status, msg string, at time.Time) (runs.Run, error) {
	if s.down {
		return runs.Run{}, s.fail()
	}
	return s.MemRuns.Transition(ctx, id, from, to, msg, at)
}

func (s *throttledRuns) Cancel(ctx context.Context, id string, from []runs.Status, by, reason string, at time.Time) (runs.Run, error) {
	if s.down {
		return runs.Run{}, s.fail()
	}
	return s.MemRuns.Cancel(ctx, id, from, by, reason, at)
}

// TestRunStoreOutageIsA503: a cancel whose run-store write is throttled
// past the SDK's retries is answered 503 idemkit.store_unavailable with
// Retry-After (as Layer 1 answers its own store's outage), not 500
// internal_error, and the key stays retryable: the same request is served
// once the store is back. Another error of the store stays a 500.
func TestRunStoreOutageIsA503(t *testing.T) {
	rs := &throttledRuns{MemRuns: runs.NewMemRuns()}
	f := hostOf(t, rs, idem.Config{}, nil)
	f.runs = rs.MemRuns
	r := f.newRun(t, "acme")
	path := "/runs/" + runs.ProjectID(r.ID) + "/cancel"
	rs.down = true
	resp, m := f.do(t, ev("POST", path, "acme", key1, `{}`))
	if resp.StatusCode != 503 || m["error"] != idem.CodeStoreUnavailable || resp.Headers[idem.HeaderRetryAfter] == "" {
		t.Fatalf("cancel while the run store is throttled: %d %v Retry-After %q; want 503 %s with Retry-After", resp.StatusCode, m, resp.Headers[idem.HeaderRetryAfter], idem.CodeStoreUnavailable)
	}
	rs.down = false
	if resp, m = f.do(t, ev("POST", path, "acme", key1, `{}`)); resp.StatusCode != 200 {
		t.Fatalf("the same cancel once the store is back: %d %v; want 200", resp.StatusCode, m)
	}
	rs.down, rs.err = true, errors.New("host: update run: a bug")
	r = f.newRun(t, "acme")
	if resp, m = f.do(t, ev("POST", "/runs/"+runs.ProjectID(r.ID)+"/cancel", "acme", "k-another-key-0123456789", `{}`)); resp.StatusCode != 500 {
		t.Fatalf("cancel on another store error: %d %v; want 500", resp.StatusCode, m)
	}
}

// TestOwnDeadlineIsNotAStoreOutage (RED_TEAM 264): a request whose own
// work outlives its deadline (a conformance-delay create held past it) is
// answered 503 runner_unavailable with Retry-After, the registry's
// retriable code of a host that could not do the work now, never 503
// idemkit.store_unavailable, which blames a store that answered every
// call; the key stays retryable: the same request is served once it fits.
func TestOwnDeadlineIsNotAStoreOutage(t *testing.T) {
	for _, pol := range []idem.Policy{idem.PolicyOpenWOP, commerce.Policy} {
		t.Run(pol.Name, func(t *testing.T) {
			f := hostOf(t, runs.NewMemRuns(), idem.Config{Policy: pol}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			req := ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-delay","inputs":{"delayMs":2000}}`)
			if pol.Name == commerce.Policy.Name {
				req = commerceReq("POST", "/runs", key1)
				req.Body, req.Headers["content-type"] = `{"workflowId":"conformance-delay","inputs":{"delayMs":2000}}`, "application/json"
			}
			resp, err := f.h.Handle(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			_ = json.Unmarshal([]byte(resp.Body), &m)
			if resp.StatusCode != 503 || m["error"] != "runner_unavailable" || resp.Headers[idem.HeaderRetryAfter] == "" {
				t.Fatalf("a create held past its deadline: %d %v Retry-After %q; want 503 runner_unavailable with Retry-After", resp.StatusCode, m, resp.Headers[idem.HeaderRetryAfter])
			}
			// Never replayed (the commerce policy keeps a 503
			// runner_unavailable answer as a failed action; this one is
			// no answer of the handler's).
			if resp, m := f.do(t, req); resp.StatusCode != 201 || resp.Headers["Idempotent-Replayed"] != "" || resp.Headers["OpenWOP-Idempotent-Replay"] != "" {
				t.Fatalf("the same request once it fits its deadline: %d %v %v; want 201, not replayed", resp.StatusCode, m, resp.Headers)
			}
		})
	}
}
