package apifn

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// panickyRuns is a run store whose Cancel of one id panics.
type panickyRuns struct {
	runs.RunStore
	bad string
}

func (p panickyRuns) Cancel(ctx context.Context, id string, from []runs.Status, by, reason string, now time.Time) (runs.Run, error) {
	if id == p.bad {
		panic("injected: a run store's Cancel panicked")
	}
	return p.RunStore.Cancel(ctx, id, from, by, reason, now)
}

// TestBulkCancelPanicOfOneIDIsTheRequestsPanic (RED_TEAM 500): a panic in
// the cancel of one id of a bulk cancel is the request's, answered as the
// same panic in a single cancel is (the Guard recovers it: 500, nothing
// recorded under the key), never a panic in a goroutine of its own that
// no recover reaches and that ends the process (every request idemkit dev
// serves, and the Lambda instance). The other ids are still cancelled
// before the answer. Before: the test binary died with the panic.
func TestBulkCancelPanicOfOneIDIsTheRequestsPanic(t *testing.T) {
	mem := runs.NewMemRuns()
	bad := bulkRun(t, mem, "acme", runs.StatusRunning)
	good := bulkRun(t, mem, "acme", runs.StatusRunning)
	f := hostOf(t, panickyRuns{RunStore: mem, bad: bad.ID}, idem.Config{}, nil)

	single, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(bad.ID)+"/cancel", "acme", "k-bulk-panic-single-0123456789", ""))
	if single.StatusCode != http.StatusInternalServerError {
		t.Fatalf("the single cancel's panic: %d %s, want 500", single.StatusCode, single.Body)
	}
	const key = "k-bulk-panic-0123456789abcdef"
	r, _ := f.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", good.ID, bad.ID)))
	if r.StatusCode != single.StatusCode {
		t.Fatalf("the bulk cancel's panic: %d %s, want %d as the single cancel's", r.StatusCode, r.Body, single.StatusCode)
	}
	if got, err := mem.Get(context.Background(), good.ID); err != nil || got.Status != runs.StatusCancelled {
		t.Errorf("the other id: %+v %v, want it cancelled", got, err)
	}
	// Nothing was recorded under the key: its retry runs again (the run
	// cancelled by its first attempt answers ok, the panicking id again
	// the request's 500).
	again, _ := f.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", good.ID, bad.ID)))
	if again.StatusCode != single.StatusCode || again.Headers["OpenWOP-Idempotent-Replay"] == "true" {
		t.Fatalf("the key's retry: %d %v %s, want %d run again", again.StatusCode, again.Headers, again.Body, single.StatusCode)
	}
}
