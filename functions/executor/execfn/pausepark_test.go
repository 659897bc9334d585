package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/faultrx"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestPausedRunWhoseNodeParksShowsItsPause: a run paused
// (drain-current-node) while its effect is delivered, the delivery to be
// tried later (409 in flight, Retry-After): the execution's park is
// refused and its run.paused is in the log at once, not held until a
// resume (RED_TEAM 377); the resumed run delivers the effect once more,
// under the same key, no earlier than its retry time, and completes.
func TestPausedRunWhoseNodeParksShowsItsPause(t *testing.T) {
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	tc := ledgertest.ClockFuncs{NowFunc: clk.Now}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: tc, Jitter: func(d time.Duration) time.Duration { return d }}})
	if err != nil {
		t.Fatal(err)
	}
	busy := faultrx.Fault{Status: http.StatusConflict, RetryAfter: "7", Body: `{"error":"idempotency_in_flight","message":"busy"}`}
	rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(busy, faultrx.OK)})
	defer rx.Close()
	rs := hostruns.NewMemRuns()
	x := &Executor{Runs: rs, Test: TestConfig{Clock: tc}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Test: webhook.TestConfig{Clock: tc}}}
	in, _ := json.Marshal(map[string]any{"url": rx.URL(), "delayMs": 0})
	run := hostruns.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, in, clk.Now())
	ctx := context.Background()
	if err := rs.Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	x.Test.NodeStarted = func(id, node string) {
		if node == "effect" && count(mustGet(t, rs, id), hostruns.EventRunPaused) == 0 {
			if _, err := rs.Pause(ctx, id, hostruns.Pause{By: "p1"}, clk.Now()); err != nil {
				t.Errorf("pause: %v", err)
			}
		}
	}
	if retry := x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	x.Test.NodeStarted = nil
	r, _ := rs.Get(ctx, run.ID)
	if r.Status != hostruns.StatusPaused || r.PausePending != nil || !r.Wake.IsZero() || len(r.Log) == 0 ||
		r.Log[len(r.Log)-1].Type != hostruns.EventRunPaused || rx.Count() != 1 {
		t.Fatalf("after the drained node's park: %s, held %v, wake %v, log %v, %d deliveries; want paused, run.paused in the log, no wake, one delivery",
			r.Status, r.PausePending != nil, r.Wake.At, logTypesOf(r), rx.Count())
	}
	if _, err := rs.Unpause(ctx, run.ID, "r1", "", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if retry := x.HandleRecords(ctx, []stream.StreamRecord{modify("e2", run, hostruns.StatusPaused, hostruns.StatusRunning)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	if r, _ = rs.Get(ctx, run.ID); r.Status != hostruns.StatusRunning || r.Wake.IsZero() || rx.Count() != 1 {
		t.Fatalf("resumed before the retry time: %s, wake %v, %d deliveries; want parked again, nothing sent", r.Status, r.Wake.At, rx.Count())
	}
	clk.Set(r.Wake.At)
	if _, err := x.ResumeDue(ctx); err != nil {
		t.Fatal(err)
	}
	r, _ = rs.Get(ctx, run.ID)
	if d := rx.Deliveries(); r.Status != hostruns.StatusCompleted || len(d) != 3 || d[0].Key != d[1].Key || count(r, hostruns.EventRunPaused) != 1 {
		t.Fatalf("run %s, %d deliveries, log %v; want completed after a second delivery under the same key (and the loop's second effect), one run.paused", r.Status, len(d), logTypesOf(r))
	}
}

func mustGet(t *testing.T, rs *hostruns.MemRuns, id string) hostruns.Run {
	t.Helper()
	r, err := rs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func count(r hostruns.Run, typ string) int {
	n := 0
	for _, ev := range r.Log {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func logTypesOf(r hostruns.Run) []string {
	out := make([]string, 0, len(r.Log))
	for _, ev := range r.Log {
		out = append(out, ev.Type+"@"+ev.NodeID)
	}
	return out
}
