package execfn

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestParkedRunsDoNotHideAStrandedRun: a pass's worth of runs parked
// (their webhooks' receivers asked them to wait an hour) longer ago than
// StaleAfter, and one run whose stream delivery was lost: the stale-run
// pass resumes the stranded run and completes it. Before RED_TEAM 485
// the pass listed the parked runs first (oldest first, DefaultResumeBatch
// of them), claimed none of them (a parked run is Due's) and never
// reached the stranded run, pass after pass, until they woke. Every run
// is in one byLive partition (sameShardRun), the stranded one too, so the
// pass meets the parked runs first whatever ids the runs get. On every
// emulator.
func TestParkedRunsDoNotHideAStrandedRun(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
		s := newFaultStack(t, e, clk, e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable"))
		s.x.StaleAfter = 10 * time.Minute
		rc := newReceiver(t)
		t0 := clk.Now()
		for i := 0; i < DefaultResumeBatch; i++ {
			r := sameShardRun(t, s, rc.srv.URL)
			if err := s.runs.Schedule(ctx, r.ID, runs.Wake{At: t0.Add(time.Hour), Attempt: 1, MaxAttempts: 4}, t0); err != nil {
				t.Fatal(err)
			}
		}
		clk.Set(t0.Add(time.Second))
		stranded := sameShardRun(t, s, rc.srv.URL)
		clk.Set(t0.Add(20 * time.Minute))
		if n, err := s.x.ResumeStale(ctx); err != nil || n != 1 {
			t.Fatalf("the stale-run pass resumed %d runs (%v), want the stranded one", n, err)
		}
		if r := s.run(t, stranded.ID); r.Status != runs.StatusCompleted {
			t.Fatalf("the stranded run is %s, want completed", r.Status)
		}
	})
}

// sameShardRun creates a webhook run (as faultStack.newRun) whose id is in
// the first of the byLive index's partitions, as the runs store spreads
// them (an FNV-1a hash of the id, modulo 4).
func sameShardRun(t *testing.T, s *faultStack, url string) runs.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": url + "/hook", "payload": map[string]any{"order": 42}})
	for {
		r := runs.NewRun("acme", webhook.WorkflowWebhook, in, s.clk.Now())
		h := fnv.New32a()
		_, _ = h.Write([]byte(r.ID))
		if h.Sum32()%4 != 0 {
			continue
		}
		if err := s.runs.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
}
