package apifn

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
)

// lostCompletion is a Layer-1 store whose first attempt's completion never
// lands: the invocation dies after the handler's effects and before its
// outcome is recorded, so none of its completions reach the store (the
// Guard's second one, the not-kept outcome it writes after a refusal,
// included) and the record stays pending until its lease ends.
type lostCompletion struct {
	idem.Store
	mu   sync.Mutex
	dead string // the owner token of the invocation that died
}

func (s *lostCompletion) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.mu.Lock()
	if s.dead == "" {
		s.dead = claim.Owner
	}
	dead := s.dead == claim.Owner
	s.mu.Unlock()
	if dead {
		return errors.New("the invocation died before its completion was written")
	}
	return s.Store.Complete(ctx, claim, out, now)
}

// TestCancelRetriedAfterCrashKeepsIts200: a cancel under an
// Idempotency-Key that cancelled the run and died before its Layer-1
// record was completed is retried, after the lease, under the same key:
// the retry re-runs the cancel, which finds the run cancelled by this very
// key's earlier attempt, and answers the 200 that attempt earned (then
// replays it), never 409 run_terminal. A cancel under another key is still
// refused 409 run_terminal. Runs and Layer-1 records in memory and on
// every emulator.
func TestCancelRetriedAfterCrashKeepsIts200(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now())
		st := &lostCompletion{Store: inner}
		gc := idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}
		f := hostOf(t, rs, gc, nil)
		ctx := context.Background()
		r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), clk.Now())
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		path := "/runs/" + runs.ProjectID(r.ID) + "/cancel"
		const key = "k-cancel-crash-0123456789abcdef"
		if resp, m := f.do(t, ev("POST", path, "acme", key, `{}`)); resp.StatusCode != 200 || m["status"] != "cancelled" {
			t.Fatalf("the cancel that died before its completion: %d %s", resp.StatusCode, resp.Body)
		}
		if got, err := rs.Get(ctx, r.ID); err != nil || got.Status != runs.StatusCancelled {
			t.Fatalf("the run: %+v %v", got, err)
		}
		clk.Advance(idem.DefaultLease + time.Second)
		resp, m := f.do(t, ev("POST", path, "acme", key, `{}`))
		if resp.StatusCode != 200 || m["status"] != "cancelled" || m["runId"] != r.ID {
			t.Fatalf("the same key's retry after the crash: %d %s, want the 200 its first attempt earned", resp.StatusCode, resp.Body)
		}
		again, _ := f.do(t, ev("POST", path, "acme", key, `{}`))
		if again.StatusCode != 200 || again.Body != resp.Body || header.First(again.Headers, "OpenWOP-Idempotent-Replay") != "true" {
			t.Fatalf("the key's replay: %d %s %v", again.StatusCode, again.Body, again.Headers)
		}
		if resp, m := f.do(t, ev("POST", path, "acme", "k-cancel-other-0123456789abcdef", `{}`)); resp.StatusCode != 409 || m["error"] != "run_terminal" {
			t.Fatalf("a cancel under another key: %d %s, want 409 run_terminal", resp.StatusCode, resp.Body)
		}
		if resp, m := f.do(t, ev("POST", path, "acme", "", "")); resp.StatusCode != 409 || m["error"] != "run_terminal" {
			t.Fatalf("a cancel without a key: %d %s, want 409 run_terminal", resp.StatusCode, resp.Body)
		}
	})
}
