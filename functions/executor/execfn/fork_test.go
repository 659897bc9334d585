package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
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
		Sleep: func(context.Context, time.Duration) error { return nil }}
	return &forkStack{runs: rs, l: l, x: x}
}

// fork creates a fork of src from fromSeq 0, as forkRun does.
func (s *forkStack) fork(t *testing.T, src runs.Run, mode runs.ForkMode) runs.Run {
	t.Helper()
	f := runs.NewRun(src.Tenant, src.WorkflowID, src.Inputs, time.Now())
	f.RecipeStamps = src.RecipeStamps
	f.Fork = &runs.Fork{SourceRunID: src.ID, Mode: mode, BranchStamps: ledger.CurrentRecipes()}
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
		s.x.Sleep = func(context.Context, time.Duration) error { return crash }
		src := runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":10}`), time.Now())
		if err := s.runs.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		if r := s.execute(t, src.ID); r.Status != runs.StatusRunning || len(rc.seen()) != 1 {
			t.Fatalf("source: %s with %d deliveries; want running (crashed) after one", r.Status, len(rc.seen()))
		}
		s.x.Sleep = func(context.Context, time.Duration) error { return nil }
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
		if r.RecipeStamps != src.RecipeStamps || r.Fork.BranchStamps != ledger.CurrentRecipes() {
			t.Fatalf("stamps: fork %+v branch %+v, source %+v", r.RecipeStamps, r.Fork.BranchStamps, src.RecipeStamps)
		}
	})
}
