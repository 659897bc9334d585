package execfn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestPausedTimeCountsTowardsTheRunsDeadline pins the contract of a run's
// `configurable.run.runTimeoutMs` across a pause: the deadline is a
// wall-clock ceiling from the run's creation, paused time included. A
// paused run is not ended by its deadline while paused (only a resume or
// a cancel leaves paused); a run resumed past its deadline is ended
// `failed` with `run_timeout`, after `cap.breached {kind: run-duration}`,
// by the executor's first check, before any further node starts, and a
// run resumed before it continues.
func TestPausedTimeCountsTowardsTheRunsDeadline(t *testing.T) {
	for _, tc := range []struct {
		name   string
		paused time.Duration // how long the run stays paused
		want   hostruns.Status
	}{
		{"resumed before its deadline", 30 * time.Second, hostruns.StatusCompleted},
		{"resumed past its deadline", 2 * time.Minute, hostruns.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
			f.x.Test.Clock = ledgertest.ClockFuncs{NowFunc: clk.Now}
			rc := newReceiver(t)
			ctx := context.Background()
			in, _ := json.Marshal(map[string]any{"url": rc.srv.URL, "delayMs": 0})
			run := hostruns.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, in, clk.Now())
			run.Options.Configurable = json.RawMessage(`{"version":1,"run":{"runTimeoutMs":60000}}`)
			if err := f.runs.Create(ctx, run); err != nil {
				t.Fatal(err)
			}
			paused := false
			f.x.Test.NodeStarted = func(id, node string) {
				if node == "effect" && !paused {
					paused = true
					if _, err := f.runs.Pause(ctx, id, hostruns.Pause{By: "p1"}, clk.Now()); err != nil {
						t.Errorf("pause: %v", err)
					}
				}
			}
			if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
				t.Fatalf("retry %v", retry)
			}
			if s := f.status(t, run.ID); s != hostruns.StatusPaused {
				t.Fatalf("after the pause: %s, want paused", s)
			}
			clk.Set(clk.Now().Add(tc.paused))
			// Past its deadline, a paused run's records drive nothing: it
			// stays paused until it is resumed or cancelled.
			if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
				t.Fatalf("retry %v", retry)
			}
			if s := f.status(t, run.ID); s != hostruns.StatusPaused {
				t.Fatalf("a paused run's record while paused: %s, want still paused", s)
			}
			if _, err := f.runs.Unpause(ctx, run.ID, "r1", "", clk.Now()); err != nil {
				t.Fatal(err)
			}
			if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{modify("e2", run, hostruns.StatusPaused, hostruns.StatusRunning)}); retry != nil {
				t.Fatalf("retry %v", retry)
			}
			got, r := logOf(t, f, run.ID)
			if r.Status != tc.want {
				t.Fatalf("after the resume: %s (%s), log %v, want %s", r.Status, r.Error, got, tc.want)
			}
			if tc.want != hostruns.StatusFailed {
				return
			}
			if r.ErrorCode != CodeRunTimeout || !equalLog(got[5:], "run.resumed@", "cap.breached@") {
				t.Fatalf("resumed past its deadline: error %q, log %v; want run.resumed then cap.breached, no node started, run_timeout", r.ErrorCode, got)
			}
			if n := len(rc.seen()); n != 1 {
				t.Fatalf("%d deliveries, want 1 (none after the resume)", n)
			}
		})
	}
}
