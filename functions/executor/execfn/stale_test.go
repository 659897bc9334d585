package execfn

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestResumerDrivesStaleRuns: runs whose creation was acknowledged but
// whose stream delivery was lost, one still pending and one left running
// by a crashed executor, are found by the stale-run pass once they have
// made no progress for StaleAfter and driven to completion; two resumers
// passing at once claim each run once (compare-and-set), and the webhook
// of each is delivered once. A run younger than the bound, a parked run
// and a finished run are left alone. On every emulator.
func TestResumerDrivesStaleRuns(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
		s := newFaultStack(t, e, clk, e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable"))
		s.x.StaleAfter = 10 * time.Minute
		var metrics testutil.SyncBuffer
		s.x.Metrics = emf.New(&metrics, "idemkit")
		rc := newReceiver(t)
		t0 := clk.Now()

		lost := s.newRun(t, rc.srv.URL) // its INSERT never reached an executor
		crashed := s.newRun(t, rc.srv.URL)
		if _, err := s.runs.Transition(ctx, crashed.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", t0); err != nil {
			t.Fatal(err)
		}
		parked := s.newRun(t, rc.srv.URL)
		if err := s.runs.Schedule(ctx, parked.ID, runs.Wake{At: t0.Add(time.Hour), Attempt: 1, MaxAttempts: 4}, t0); err != nil {
			t.Fatal(err)
		}
		done := s.newRun(t, rc.srv.URL)
		if _, err := s.runs.Transition(ctx, done.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", t0); err != nil {
			t.Fatal(err)
		}
		clk.Set(t0.Add(9 * time.Minute))
		young := s.newRun(t, rc.srv.URL)

		// Before the bound: nothing is stale.
		if n, err := s.x.ResumeStale(ctx); err != nil || n != 0 {
			t.Fatalf("before the bound: resumed %d (%v), want none", n, err)
		}

		clk.Set(t0.Add(10*time.Minute + time.Second))
		// A second executor on the same stores (a peer resumer).
		other := Executor{Runs: s.x.Runs, Webhook: s.x.Webhook, Logger: s.x.Logger, MaxAttempts: s.x.MaxAttempts, LastTryMargin: s.x.LastTryMargin,
			Parked: s.x.Parked, Fixture: s.x.Fixture, FixtureURL: s.x.FixtureURL, NoopEffect: s.x.NoopEffect, StaleAfter: s.x.StaleAfter,
			Heartbeat: s.x.Heartbeat, Metrics: s.x.Metrics, Test: s.x.Test}
		var wg sync.WaitGroup
		counts := make([]int, 2)
		for i, x := range []*Executor{s.x, &other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := x.ResumeStale(ctx)
				if err != nil {
					t.Errorf("resumer %d: %v", i, err)
				}
				counts[i] = n
			}()
		}
		wg.Wait()
		if counts[0]+counts[1] != 2 {
			t.Errorf("resumers claimed %v runs, want the two stale runs claimed once in all", counts)
		}
		for _, id := range []string{lost.ID, crashed.ID} {
			if r := s.run(t, id); r.Status != runs.StatusCompleted {
				t.Errorf("stale run %s: %s, want completed", id, r.Status)
			}
			if rows := firedRows(t, s.l, id); len(rows) != 1 {
				t.Errorf("stale run %s: %d fired attempts, want 1", id, len(rows))
			}
		}
		if got := len(rc.seen()); got != 2 {
			t.Errorf("receiver saw %d deliveries, want 2 (one per stale run)", got)
		}
		// Each claimed stale run is counted once (no dimensions); the one
		// that was still pending starts now, its start lag reported under
		// the trigger "stale" (the crashed one had started before).
		stale, lags := 0, 0
		for _, line := range strings.Split(strings.TrimSpace(metrics.String()), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			switch {
			case rec[MetricStaleRuns] != nil:
				stale += int(rec[MetricStaleRuns].(float64))
				if len(rec) != 2 { // _aws and the value
					t.Errorf("%s carries dimensions: %s", MetricStaleRuns, line)
				}
			case rec[MetricStartLag] != nil:
				if rec[DimTrigger] == TriggerStale {
					lags++
				}
			}
		}
		if stale != 2 || lags != 1 {
			t.Errorf("metrics: %d stale runs counted and %d start lags with trigger %q, want 2 and 1:\n%s", stale, lags, TriggerStale, metrics.String())
		}
		for id, want := range map[string]runs.Status{young.ID: runs.StatusPending, parked.ID: runs.StatusPending, done.ID: runs.StatusCancelled} {
			if r := s.run(t, id); r.Status != want {
				t.Errorf("run %s: %s, want %s (untouched)", id, r.Status, want)
			}
		}

		// A claim is progress: the same runs are not claimed again until
		// they have been without progress for the bound once more, and
		// finished runs never are.
		if n, err := s.x.ResumeStale(ctx); err != nil || n != 0 {
			t.Errorf("second pass resumed %d (%v), want none", n, err)
		}
	})
}

// TestStaleRunFailuresAreCounted: a stale run whose execution keeps
// failing is counted like a stream try on every pass, and the pass that is
// its last try ends it failed: the resumer never leaves it live forever.
func TestStaleRunFailuresAreCounted(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Now().UTC()}
	mem := runs.NewMemRuns()
	x := &Executor{Runs: mem, Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}, StaleAfter: time.Minute, MaxAttempts: 2}
	r := runs.NewRun("acme", "webhook", []byte(`{"url":"http://127.0.0.1:1/x"}`), clk.Now())
	if err := mem.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	// No webhook deliverer: every execution fails transiently.
	for pass := 1; pass <= 2; pass++ {
		clk.mu.Lock()
		clk.t = clk.t.Add(2 * time.Minute)
		clk.mu.Unlock()
		if n, _ := x.ResumeStale(ctx); n != 1 {
			t.Fatalf("pass %d claimed %d runs, want 1", pass, n)
		}
	}
	got, err := mem.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runs.StatusFailed || got.Failures != 2 {
		t.Fatalf("after two failing passes: %s with %d failures, want failed after 2", got.Status, got.Failures)
	}
}
