package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/divergence"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

type forkStack struct {
	runs *runs.DynamoRuns
	l    *ledger.Ledger
	x    *Executor
}

func newForkStack(t *testing.T, e *dynamotest.Emulator) *forkStack {
	c := e.Client(dynamotest.FastRetries)
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: e.CreateTable(t, "EffectsTable")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: st, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
	w := &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}
	x := &Executor{Runs: rs, Webhook: w, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Test: TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}}
	return &forkStack{runs: rs, l: l, x: x}
}

// fork creates a fork of src from fromSeq 0, as forkRun does.
func (s *forkStack) fork(t *testing.T, src runs.Run, mode runs.ForkMode) runs.Run {
	t.Helper()
	return s.forkFrom(t, src, mode, 0)
}

// forkFrom creates a fork of src from fromSeq as forkRun does
// (runs.NewFork), inheriting src's events before fromSeq in the shape the
// executor folds (type, node and sequence; run.started at 0 unless src is
// itself a fork with a prefix).
func (s *forkStack) forkFrom(t *testing.T, src runs.Run, mode runs.ForkMode, fromSeq int64) runs.Run {
	t.Helper()
	var log []runs.InheritedEvent
	next := int64(1)
	if src.Fork != nil && src.Fork.FromSeq > 0 {
		log, next = append(log, src.Fork.Inherited...), src.Fork.FromSeq
	} else {
		log = append(log, runs.InheritedEvent{Type: "run.started", Payload: json.RawMessage(`{}`)})
	}
	for _, e := range src.Log {
		log = append(log, runs.InheritedEvent{Sequence: next, Type: e.Type, NodeID: e.NodeID, Payload: e.Payload})
		next++
	}
	var inherited []runs.InheritedEvent
	for _, e := range log {
		if e.Sequence < fromSeq {
			inherited = append(inherited, e)
		}
	}
	f := runs.NewFork(src, mode, fromSeq, inherited, time.Now())
	if mode == runs.ForkReplay {
		for _, e := range log {
			if e.Sequence >= fromSeq && (e.NodeID != "" || e.Type == runs.EventRunPaused) {
				e.EventID = fmt.Sprintf("source-event-%016d", e.Sequence)
				f.Fork.Recorded = append(f.Fork.Recorded, e)
			}
		}
		f.Fork.SourceComplete = src.Status.Terminal()
	}
	if err := s.runs.Create(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	return f
}

func (s *forkStack) execute(t *testing.T, id string) runs.Run {
	t.Helper()
	_ = s.x.Execute(context.Background(), id)
	r, err := s.runs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReplayForkOfADeliveredWebhookDeliversNothing: a replay fork of a run
// that delivered a webhook resolves the delivery from the source's record:
// the receiver sees no new request (counted by provider key) and the
// fork's witness has no attempt; a branch fork delivers again, under its
// own provider key.
func TestReplayForkOfADeliveredWebhookDeliversNothing(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newForkStack(t, e)
		rc := newReceiver(t)
		in, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/hook", "payload": map[string]any{"order": 7}})
		src := runs.NewRun("acme", webhook.WorkflowWebhook, in, time.Now())
		if err := s.runs.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		if r := s.execute(t, src.ID); r.Status != runs.StatusCompleted || len(rc.seen()) != 1 {
			t.Fatalf("source: %s, %d deliveries", r.Status, len(rc.seen()))
		}
		rep := s.fork(t, src, runs.ForkReplay)
		if r := s.execute(t, rep.ID); r.Status != runs.StatusCompleted {
			t.Fatalf("replay fork: %s %s", r.Status, r.Error)
		}
		if n := len(rc.seen()); n != 1 {
			t.Fatalf("a replay fork delivered: the receiver saw %d requests", n)
		}
		if w, err := s.l.Witness(context.Background(), rep.ID); err != nil || len(w.Effects) != 0 {
			t.Fatalf("replay fork witness: %+v, %v; want no attempt", w, err)
		}
		br := s.fork(t, src, runs.ForkBranch)
		if r := s.execute(t, br.ID); r.Status != runs.StatusCompleted {
			t.Fatalf("branch fork: %s %s", r.Status, r.Error)
		}
		keys := rc.seen()
		if len(keys) != 2 || keys[0] == keys[1] {
			t.Fatalf("a branch fork re-fires under its own provider key: %v", keys)
		}
	})
}

// TestReplayForkAfterACrashResolvesCompletedNodesFromTheRecord: the source
// of the looped fixture crashes inside its wait (after effect's first
// execution completed); a replay fork resolves execution 1 from the
// record, sends nothing, and fails execution 2 closed with
// replay_source_missing. The fork inherits the source's recipe stamps.
func TestReplayForkAfterACrashResolvesCompletedNodesFromTheRecord(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newForkStack(t, e)
		rc := newReceiver(t)
		s.x.FixtureURL = rc.srv.URL + "/fixture"
		crash := errors.New("crash inside the wait")
		s.x.Test.Clock = ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return crash }}
		src := runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":10}`), time.Now())
		if err := s.runs.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		if r := s.execute(t, src.ID); r.Status != runs.StatusRunning || len(rc.seen()) != 1 {
			t.Fatalf("source: %s with %d deliveries; want running (crashed) after one", r.Status, len(rc.seen()))
		}
		s.x.Test.Clock = ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}
		rep := s.fork(t, src, runs.ForkReplay)
		r := s.execute(t, rep.ID)
		if r.Status != runs.StatusFailed || len(rc.seen()) != 1 {
			t.Fatalf("replay fork: %s (%s), %d deliveries; want failed closed, nothing sent", r.Status, r.Error, len(rc.seen()))
		}
		var completed, missing int
		for _, ev := range r.Log {
			if ev.NodeID != "effect" {
				continue
			}
			switch ev.Type {
			case runs.EventNodeCompleted:
				completed++
			case runs.EventNodeFailed:
				var p struct {
					Error struct{ Code string } `json:"error"`
				}
				_ = json.Unmarshal(ev.Payload, &p)
				if p.Error.Code == CodeReplaySourceMissing {
					missing++
				}
			}
		}
		if completed != 1 || missing != 1 {
			t.Fatalf("fork log: %d completions, %d replay_source_missing; want 1 and 1: %+v", completed, missing, r.Log)
		}
		if w, err := s.l.Witness(context.Background(), rep.ID); err != nil || len(w.Effects) != 0 {
			t.Fatalf("replay fork witness: %+v, %v", w, err)
		}
		if r.Stamps != src.Stamps || r.Fork.BranchStamps != identity.CurrentStamps() {
			t.Fatalf("stamps: fork %+v branch %+v, source %+v", r.Stamps, r.Fork.BranchStamps, src.Stamps)
		}
	})
}

// effectOutcomes counts the effect node's completions by how they came
// about (x-idemkit-effect) and its node.failed codes, in a run's own log.
func effectOutcomes(r runs.Run) map[string]int {
	out := map[string]int{}
	for _, ev := range r.Log {
		if ev.NodeID != "effect" {
			continue
		}
		var p struct {
			Effect string `json:"x-idemkit-effect"`
			Error  struct{ Code string }
		}
		_ = json.Unmarshal(ev.Payload, &p)
		switch ev.Type {
		case runs.EventNodeCompleted:
			out[p.Effect]++
		case runs.EventNodeFailed:
			out[p.Error.Code]++
		}
	}
	return out
}

// TestReplayForkOfABranchResolvesEachExecutionFromTheRunThatRecordedIt: the
// looped fixture performs effect twice; a branch fork from sequence 5
// inherits execution 1 and performs execution 2 under its own runId; a
// replay fork of the branch from sequence 1 re-executes both and resolves
// execution 1 from the original's record and execution 2 from the
// branch's, sending nothing and adding no attempt anywhere.
func TestReplayForkOfABranchResolvesEachExecutionFromTheRunThatRecordedIt(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newForkStack(t, e)
		rc := newReceiver(t)
		s.x.FixtureURL = rc.srv.URL + "/fixture"
		src := runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":1}`), time.Now())
		if err := s.runs.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		src = s.execute(t, src.ID)
		if src.Status != runs.StatusCompleted || len(rc.seen()) != 2 {
			t.Fatalf("source: %s, %d deliveries", src.Status, len(rc.seen()))
		}
		// Events: 0 run.started, 1-2 start, 3-4 effect (execution 1),
		// 5-6 wait, 7-8 effect (execution 2), 9-10 wait, 11 run.completed.
		br := s.execute(t, s.forkFrom(t, src, runs.ForkBranch, 5).ID)
		if got := effectOutcomes(br); br.Status != runs.StatusCompleted || got[effectRefired] != 1 || len(rc.seen()) != 3 {
			t.Fatalf("branch: %s %s, effect %v, %d deliveries; want one re-fire", br.Status, br.Error, got, len(rc.seen()))
		}
		rep := s.execute(t, s.forkFrom(t, br, runs.ForkReplay, 1).ID)
		if got := effectOutcomes(rep); rep.Status != runs.StatusCompleted || got[effectResolved] != 2 || len(got) != 1 {
			t.Fatalf("replay of the branch: %s %s, effect %v; want both executions resolved from the record", rep.Status, rep.Error, got)
		}
		if n := len(rc.seen()); n != 3 {
			t.Fatalf("the replay of the branch delivered: %d requests", n)
		}
		for _, id := range []string{src.ID, br.ID, rep.ID} {
			w, err := s.l.Witness(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			attempts := len(w.Effects) // one row per attempt
			if want := map[string]int{src.ID: 2, br.ID: 1, rep.ID: 0}[id]; attempts != want {
				t.Fatalf("witness of %s: %d attempts, want %d", id, attempts, want)
			}
		}
	})
}

// TestReplayForkOfAForkUsesTheRecordedStamps: a branch of a run stamped
// with recipes this kit does not compute (a history recorded under other
// recipes) performs its new work under the host's selected recipes, and a
// replay of that branch resolves the branch's execution under the stamps
// the branch recorded it with, not the stamps of the history it inherited
// (which would be refused as unsupported, or key another record).
func TestReplayForkOfAForkUsesTheRecordedStamps(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newForkStack(t, e)
		rc := newReceiver(t)
		s.x.FixtureURL = rc.srv.URL + "/fixture"
		old := identity.Stamps{ActivityIdentityRecipe: "openwop-activity-v1", SemanticRequestRecipe: "openwop-semantic-request-v1"}
		src := runs.NewRun("acme", webhook.WorkflowReplaySideEffect, json.RawMessage(`{"delayMs":1}`), time.Now())
		src.Stamps = old
		src.Status = runs.StatusCompleted // recorded elsewhere: run.started, run.completed
		if err := s.runs.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		br := s.execute(t, s.forkFrom(t, src, runs.ForkBranch, 1).ID)
		if br.Status != runs.StatusCompleted || br.Stamps != old || br.Fork.BranchStamps != identity.CurrentStamps() || len(rc.seen()) != 1 {
			t.Fatalf("branch: %s %s, stamps %+v / %+v, %d deliveries", br.Status, br.Error, br.Stamps, br.Fork.BranchStamps, len(rc.seen()))
		}
		rep := s.forkFrom(t, br, runs.ForkReplay, 1)
		if rep.Stamps != old || len(rep.Fork.Ancestry) != 2 || rep.Fork.Ancestry[0].Stamps != identity.CurrentStamps() || rep.Fork.Ancestry[1].Stamps != old {
			t.Fatalf("replay stamps %+v, ancestry %+v", rep.Stamps, rep.Fork.Ancestry)
		}
		rep = s.execute(t, rep.ID)
		if got := effectOutcomes(rep); rep.Status != runs.StatusCompleted || got[effectResolved] != 1 || len(rc.seen()) != 1 {
			t.Fatalf("replay of the branch: %s %s, effect %v, %d deliveries", rep.Status, rep.Error, got, len(rc.seen()))
		}
	})
}

// TestReplayForkRecordsDivergence: a replay whose re-executed node events
// differ from the source's records replay.diverged right after each
// (payload valid against its schema) and continues: an output that
// differs is "output"; the side-effecting node that fails closed where the
// source completed is "type-mismatch". A faithful replay records none
// (TestGraphRunRoundTrips counts its events).
func TestReplayForkRecordsDivergence(t *testing.T) {
	o := wireschema.Load(t)
	sch, err := o.Schema("run-event-payloads.schema.json#/$defs/replayDiverged")
	if err != nil {
		t.Fatal(err)
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newForkStack(t, e)
		rc := newReceiver(t)
		s.x.FixtureURL = rc.srv.URL + "/fixture"
		ctx := context.Background()
		// A source recorded elsewhere (no ledger record of its effect):
		// start completed with an output this code does not produce.
		src := runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":1}`), time.Now())
		if err := s.runs.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		running, err := s.runs.Transition(ctx, src.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ev := func(typ, node, payload string) runs.LogEvent {
			return runs.LogEvent{Type: typ, NodeID: node, At: time.Now(), Payload: json.RawMessage(payload)}
		}
		if _, err := s.runs.AppendLog(ctx, src.ID, running.Fence(), []runs.LogEvent{
			ev(runs.EventNodeStarted, "start", `{"nodeId":"start","typeId":"core.noop"}`),
			ev(runs.EventNodeCompleted, "start", `{"nodeId":"start","outputs":{"x":1}}`),
			ev(runs.EventNodeStarted, "effect", `{"nodeId":"effect","typeId":"core.conformance.side-effect"}`),
			ev(runs.EventNodeCompleted, "effect", `{"nodeId":"effect","outputs":{},"x-idemkit-effect":"performed"}`),
		}, time.Now()); err != nil {
			t.Fatal(err)
		}
		src, err = s.runs.Transition(ctx, src.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		rep := s.execute(t, s.forkFrom(t, src, runs.ForkReplay, 1).ID)
		if rep.Status != runs.StatusFailed || len(rc.seen()) != 0 {
			t.Fatalf("replay: %s (%s), %d deliveries; want failed closed, nothing sent", rep.Status, rep.Error, len(rc.seen()))
		}
		var got []divergence.Diverged
		for i, le := range rep.Log {
			if le.Type != divergence.Event {
				continue
			}
			if err := wireschema.Validate(sch, le.Payload); err != nil {
				t.Fatalf("replay.diverged payload %s: %v", le.Payload, err)
			}
			var d divergence.Diverged
			if err := json.Unmarshal(le.Payload, &d); err != nil {
				t.Fatal(err)
			}
			if i == 0 || rep.Log[i-1].Type != d.DivergencePoint || d.AtSequence != rep.LogBase()+int64(i-1) {
				t.Fatalf("replay.diverged %+v does not follow its diverging event (log %d)", d, i)
			}
			got = append(got, d)
		}
		want := []divergence.Diverged{
			{SourceRunID: src.ID, AtSequence: 2, OriginalEventID: fmt.Sprintf("source-event-%016d", 2), DivergenceKind: divergence.Output, DivergencePoint: runs.EventNodeCompleted},
			{SourceRunID: src.ID, AtSequence: 5, OriginalEventID: fmt.Sprintf("source-event-%016d", 4), DivergenceKind: divergence.TypeMismatch, DivergencePoint: runs.EventNodeFailed},
		}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("divergences %+v, want %+v", got, want)
		}
	})
}

// TestReplayForkInsideANodeRestartsIt: the prefix boundary is exclusive. A
// replay fork of conformance-multi-node (a -> b -> c) from the sequence of
// node a's node.completed inherits a's node.started as fixed history and
// re-executes a from its start: its first own event, at fromSeq, is a
// fresh node.started a, never the source's node.completed carried over;
// the rest of its log matches the source's event for event, so no
// replay.diverged is recorded. A fork from just after a's completion starts
// at b. Both on the emulators. (Before the fix the fork's event at fromSeq
// was node.completed a.)
func TestReplayForkInsideANodeRestartsIt(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newForkStack(t, e)
		src := runs.NewRun("acme", webhook.WorkflowMultiNode, json.RawMessage(`{}`), time.Now())
		if err := s.runs.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		src = s.execute(t, src.ID)
		if src.Status != runs.StatusCompleted || len(src.Log) != 6 {
			t.Fatalf("source: %s, log %+v", src.Status, src.Log)
		}
		// Sequences: 0 run.started, 1 node.started a, 2 node.completed a,
		// 3 node.started b, ...
		for _, c := range []struct {
			fromSeq int64
			want    string
		}{{2, "node.started a"}, {3, "node.started b"}} {
			f := s.execute(t, s.forkFrom(t, src, runs.ForkReplay, c.fromSeq).ID)
			if f.Status != runs.StatusCompleted || len(f.Log) == 0 {
				t.Fatalf("fork from %d: %s %s", c.fromSeq, f.Status, f.Error)
			}
			if got := f.Log[0].Type + " " + f.Log[0].NodeID; got != c.want || f.LogBase() != c.fromSeq {
				t.Fatalf("fork from %d: the event at fromSeq (%d) is %q, want %q", c.fromSeq, f.LogBase(), got, c.want)
			}
			want := 6 - int(c.fromSeq-1)
			if c.fromSeq == 2 {
				want++ // a's start is inherited and recorded afresh
			}
			if len(f.Log) != want {
				t.Fatalf("fork from %d: %d own events, want %d: %+v", c.fromSeq, len(f.Log), want, f.Log)
			}
			for _, ev := range f.Log {
				if ev.Type == divergence.Event {
					t.Fatalf("fork from %d diverged: %s", c.fromSeq, ev.Payload)
				}
			}
		}
	})
}
