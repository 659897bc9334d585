package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// staleDrainStore is a run store with pauses, as the functions' is.
type staleDrainStore interface {
	hostruns.RunStore
	hostruns.PauseStore
}

// TestStalePassRecordsThePauseOfAStoppedExecution: a run paused
// (drain-current-node) while its effect node executes, whose execution
// then stops mid-node (its process dies: its record is retried, and the
// retry finds the run paused; or it fails transiently: NoteFailure is
// refused on the paused run and the record is done), showed no
// run.paused until a resume (RED_TEAM 388). The stale-run pass records
// it once the run's claim has gone unrenewed for StaleAfter, and not
// before: two passes at once record it once, neither claims nor drives
// the run (it stays paused, nothing delivered), a later pass changes
// nothing; the resume records run.resumed and no second run.paused, and
// the resumed run continues the node to the run's end. In memory and on
// every emulator, with an injected clock.
func TestStalePassRecordsThePauseOfAStoppedExecution(t *testing.T) {
	for _, how := range []string{"died", "transient"} {
		t.Run(how+"/memory", func(t *testing.T) {
			clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
			tc := ledgertest.ClockFuncs{NowFunc: clk.Now}
			l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: tc, Jitter: func(d time.Duration) time.Duration { return d }}})
			if err != nil {
				t.Fatal(err)
			}
			w := &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Test: webhook.TestConfig{Clock: tc}}
			staleDrain(t, how, hostruns.NewMemRuns(), w, clk)
		})
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, how := range []string{"died", "transient"} {
			t.Run(how, func(t *testing.T) {
				clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
				s := newFaultStack(t, e, clk, e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable"))
				staleDrain(t, how, s.runs, s.x.Webhook, clk)
			})
		}
	})
}

func staleDrain(t *testing.T, how string, rs staleDrainStore, w *webhook.Webhook, clk *clock) {
	const staleAfter = 10 * time.Minute
	tc := ledgertest.ClockFuncs{NowFunc: clk.Now}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	// The first execution has no deliverer: its effect node fails at
	// once, transiently, after node.started.
	first := &Executor{Runs: rs, Logger: logger, StaleAfter: staleAfter, Test: TestConfig{Clock: tc}}
	rc := newReceiver(t)
	in, _ := json.Marshal(map[string]any{"url": rc.srv.URL, "delayMs": 0})
	run := hostruns.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, in, clk.Now())
	bg := context.Background()
	if err := rs.Create(bg, run); err != nil {
		t.Fatal(err)
	}
	ctx, kill := context.WithCancel(bg)
	defer kill()
	first.Test.NodeStarted = func(id, node string) {
		if node != "effect" {
			return
		}
		if _, err := rs.Pause(bg, id, hostruns.Pause{By: "p1"}, clk.Now()); err != nil {
			t.Errorf("pause: %v", err)
		}
		if how == "died" {
			kill() // its process stops: nothing more is written, its record is retried
		}
	}
	retry := first.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)})
	if (how == "died") != (retry != nil) {
		t.Fatalf("%s: records to retry %v", how, retry)
	}
	first.Test.NodeStarted = nil
	// The record's retry (its stream, or the give-up's) drives nothing.
	if retry := first.HandleRecords(bg, []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("the retry of the paused run's record: %v", retry)
	}
	r := mustGetStore(t, rs, run.ID)
	if r.Status != hostruns.StatusPaused || r.PausePending == nil || count(r, hostruns.EventRunPaused) != 0 {
		t.Fatalf("after the execution stopped: %s, held %v, log %v; want paused, run.paused held", r.Status, r.PausePending != nil, logTypesOf(r))
	}
	x := &Executor{Runs: rs, Webhook: w, Logger: logger, StaleAfter: staleAfter, Test: TestConfig{Clock: tc}}
	// Before the claim went unrenewed for StaleAfter: nothing released.
	clk.Set(r.UpdatedAt.Add(staleAfter - time.Millisecond))
	if n, err := x.ResumeStale(bg); err != nil || n != 0 {
		t.Fatalf("a pass before the bound: %d claimed, %v", n, err)
	}
	if r = mustGetStore(t, rs, run.ID); r.PausePending == nil || count(r, hostruns.EventRunPaused) != 0 {
		t.Fatalf("a pass before the bound released the pause: log %v", logTypesOf(r))
	}
	// Two passes at once, past it: run.paused recorded once.
	clk.Set(r.UpdatedAt.Add(staleAfter + time.Second))
	other := &Executor{Runs: rs, Webhook: w, Logger: logger, StaleAfter: staleAfter, Test: TestConfig{Clock: tc}}
	var wg sync.WaitGroup
	claimed := make([]int, 2)
	for i, p := range []*Executor{x, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := p.ResumeStale(bg)
			if err != nil {
				t.Errorf("pass %d: %v", i, err)
			}
			claimed[i] = n
		}()
	}
	wg.Wait()
	r = mustGetStore(t, rs, run.ID)
	if r.Status != hostruns.StatusPaused || r.PausePending != nil || count(r, hostruns.EventRunPaused) != 1 ||
		r.Log[len(r.Log)-1].Type != hostruns.EventRunPaused || claimed[0]+claimed[1] != 0 || len(rc.seen()) != 0 {
		t.Fatalf("after the stale passes: %s, held %v, log %v, %v claimed, %d deliveries; want paused, one run.paused last, none claimed, nothing delivered",
			r.Status, r.PausePending != nil, logTypesOf(r), claimed, len(rc.seen()))
	}
	clk.Set(clk.Now().Add(2 * staleAfter))
	if n, err := x.ResumeStale(bg); err != nil || n != 0 {
		t.Fatalf("a later pass: %d claimed, %v", n, err)
	}
	if again := mustGetStore(t, rs, run.ID); len(again.Log) != len(r.Log) || again.Status != hostruns.StatusPaused {
		t.Fatalf("a later pass changed the run: %s, log %v", again.Status, logTypesOf(again))
	}
	if _, err := rs.Unpause(bg, run.ID, "r1", "", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if retry := x.HandleRecords(bg, []stream.StreamRecord{modify("e2", run, hostruns.StatusPaused, hostruns.StatusRunning)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	r = mustGetStore(t, rs, run.ID)
	if r.Status != hostruns.StatusCompleted || count(r, hostruns.EventRunPaused) != 1 || count(r, hostruns.EventRunResumed) != 1 || len(rc.seen()) != 2 {
		t.Fatalf("after the resume: %s, log %v, %d deliveries; want completed, one run.paused and run.resumed, each effect delivered once",
			r.Status, logTypesOf(r), len(rc.seen()))
	}
}

func mustGetStore(t *testing.T, rs hostruns.RunStore, id string) hostruns.Run {
	t.Helper()
	r, err := rs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestStalePassReleaseRoundTrips: the stale-run pass's cost, on every
// emulator. With no stale run it is its listing alone, one Query per
// shard of the stale-run index (four), as before; a run whose draining
// execution stopped adds its refused Claim (one UpdateItem, and a
// GetItem on an engine whose refused write does not return the item)
// and the release (one UpdateItem), and nothing more (RED_TEAM 388).
func TestStalePassReleaseRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		rs := &hostruns.DynamoRuns{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
		x := &Executor{Runs: rs, StaleAfter: time.Minute, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}}
		r := hostruns.NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), clk.Now())
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		run, err := rs.Transition(ctx, r.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		ev := hostruns.LogEvent{Type: hostruns.EventNodeStarted, NodeID: "webhook", At: clk.Now(), Payload: json.RawMessage(`{"nodeId":"webhook"}`)}
		if _, err := rs.AppendLog(ctx, r.ID, run.Fence(), []hostruns.LogEvent{ev}, clk.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Pause(ctx, r.ID, hostruns.Pause{By: "p1"}, clk.Now()); err != nil {
			t.Fatal(err)
		}
		cnt.Reset()
		if _, err := x.ResumeStale(ctx); err != nil {
			t.Fatal(err)
		}
		if ops := cnt.Ops(); cnt.Total() != 4 || ops["Query"] != 4 {
			t.Fatalf("a pass with nothing stale: %v, want 4 Queries", ops)
		}
		clk.Set(clk.Now().Add(time.Minute))
		cnt.Reset()
		if _, err := x.ResumeStale(ctx); err != nil {
			t.Fatal(err)
		}
		ops := cnt.Ops()
		if ops["Query"] != 4 || ops["UpdateItem"] != 2 || ops["GetItem"] > 1 || cnt.Total() != 6+ops["GetItem"] {
			t.Fatalf("a pass releasing one run.paused: %v, want 4 Queries, 2 UpdateItems (the refused claim, the release), at most 1 GetItem", ops)
		}
		if got := mustGetStore(t, rs, r.ID); got.PausePending != nil || count(got, hostruns.EventRunPaused) != 1 {
			t.Fatalf("after the pass: log %v, want run.paused recorded", logTypesOf(got))
		}
	})
}
