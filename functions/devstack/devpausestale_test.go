package devstack

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestDevResumePassRecordsAStoppedDrainsPause: `idemkit dev`'s resumer
// pass (devResumePass: the due runs, then the stale runs) records the
// held run.paused of a run paused while its node drained whose execution
// stopped mid-node, once its claim went unrenewed for the executor's
// StaleAfter (RUN_STALE_SECONDS), as the deployed schedule's pass does
// (RED_TEAM 388): not before, once, the run left paused.
func TestDevResumePassRecordsAStoppedDrainsPause(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now().UTC().Truncate(time.Millisecond)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); defer mu.Unlock(); now = t }
	mem := runs.NewMemRuns()
	r := runs.NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), clock())
	if err := mem.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	run, err := mem.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", clock())
	if err != nil {
		t.Fatal(err)
	}
	ev := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "webhook", At: clock(), Payload: json.RawMessage(`{"nodeId":"webhook"}`)}
	if _, err := mem.AppendLog(ctx, r.ID, run.Fence(), []runs.LogEvent{ev}, clock()); err != nil {
		t.Fatal(err)
	}
	paused, err := mem.Pause(ctx, r.ID, runs.Pause{By: "p1"}, clock())
	if err != nil || paused.PausePending == nil {
		t.Fatalf("pause while the node drains: %+v %v", paused, err)
	}
	// The executor as the stack builds it (stack.go), its clock injected.
	x := &execfn.Executor{Runs: mem, StaleAfter: time.Minute, Test: execfn.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock}}}
	pass := devResumePass(x)
	set(paused.UpdatedAt.Add(time.Minute - time.Millisecond))
	if _, err := pass(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := mem.Get(ctx, r.ID); got.PausePending == nil {
		t.Fatalf("a pass before RUN_STALE_SECONDS recorded the pause: log %v", got.Log)
	}
	set(paused.UpdatedAt.Add(time.Minute))
	for range 2 {
		if n, err := pass(ctx); err != nil || n != 0 {
			t.Fatalf("pass: %d runs executed, %v; want none", n, err)
		}
	}
	got, _ := mem.Get(ctx, r.ID)
	if got.Status != runs.StatusPaused || got.PausePending != nil || len(got.Log) != 2 || got.Log[1].Type != runs.EventRunPaused {
		t.Fatalf("after the passes: %s, held %v, log %+v; want paused, node.started then one run.paused", got.Status, got.PausePending != nil, got.Log)
	}
}
