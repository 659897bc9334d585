package apifn

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
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
