package execfn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestStalePassDrivesTheRunWhoseClaimAnswerWasLost: the stale-run pass
// claims a stranded run, the engine applies the claim and its answer is
// lost, and the SDK's retry finds the run no longer stale (the claim moved
// its update time). The pass still drives the run it claimed (the store
// recognises its own landed claim, RED_TEAM 500): the run completes in that
// pass, one delivery. Before, the pass skipped it as "progressed", and the
// claimed run, which no execution drove, waited a whole staleness bound
// more for the next pass.
func TestStalePassDrivesTheRunWhoseClaimAnswerWasLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rig := newFaultRig(t, e, nil)
		x, faults, store, clk := rig.x, rig.faults, rig.store, rig.clk
		rc := newReceiver(t)
		in, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/hook", "payload": 1})
		r := runs.NewRun("acme", webhook.WorkflowWebhook, in, clk.Now())
		if err := store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		// Started by an execution that then died: running, stranded.
		if _, err := store.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", clk.Now()); err != nil {
			t.Fatal(err)
		}
		clk.Set(clk.Now().Add(time.Minute))
		faults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost()) // the pass's Claim
		n, err := x.ResumeStale(ctx)
		if faults.Fired() != 1 {
			t.Fatalf("the claim's answer was not lost (%d faults fired)", faults.Fired())
		}
		got, gerr := store.Get(ctx, r.ID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if err != nil || n != 1 || got.Status != runs.StatusCompleted || len(rc.seen()) != 1 {
			t.Fatalf("the pass whose claim's answer was lost: drove %d (%v); the run is %s, %d deliveries; want it driven to completed, one delivery",
				n, err, got.Status, len(rc.seen()))
		}
	})
}
