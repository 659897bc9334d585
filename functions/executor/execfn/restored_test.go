package execfn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// interrupted is a conformance-multi-node run left running in store by an
// executor that died right after recording node a's node.started at at.
func interrupted(t *testing.T, store logStore, at time.Time) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun("acme", webhook.WorkflowMultiNode, json.RawMessage(`{}`), at)
	if err := store.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	running, err := store.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AppendLog(ctx, r.ID, running.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "a", At: at,
		Payload: json.RawMessage(`{"nodeId":"a","typeId":"core.noop"}`)}}, at); err != nil {
		t.Fatal(err)
	}
	return r
}

func logTypes(r runs.Run) string {
	out := "["
	for i, e := range r.Log {
		if i > 0 {
			out += " "
		}
		out += e.Type + " " + e.NodeID
	}
	return out + "]"
}

// TestInterruptedRunIsRecordedAsRestored: a run whose executor died inside
// a node is resumed by an executor that started after the run's last
// update (TestConfig.Booted, `idemkit dev`) with workflow.restored first in
// its log, then the node re-executed from its start (no second
// node.started) and the rest of the walk; an executor without Booted (the
// deployed function) resumes it without the event, as before. The
// stale-run pass records it too. TestConfig.Held keeps a run from being
// started: its stream record is retried and no failure is counted. On the
// emulators.
func TestInterruptedRunIsRecordedAsRestored(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		s := newForkStack(t, e)
		t0 := time.Now().UTC().Add(-time.Minute).Truncate(time.Millisecond)

		booted := interrupted(t, s.runs, t0)
		s.x.Test.Booted = time.Now()
		r := s.execute(t, booted.ID)
		want := "[node.started a workflow.restored  node.completed a node.started b node.completed b node.started c node.completed c]"
		if r.Status != runs.StatusCompleted || logTypes(r) != want {
			t.Fatalf("resumed after a restart: %s %v", r.Status, logTypes(r))
		}

		s.x.Test.Booted = time.Time{}
		plain := interrupted(t, s.runs, t0)
		if r := s.execute(t, plain.ID); r.Status != runs.StatusCompleted || len(r.Log) != 6 {
			t.Fatalf("resumed by an executor without Booted: %s %v", r.Status, logTypes(r))
		}

		stale := interrupted(t, s.runs, t0)
		s.x.StaleAfter = time.Second
		if n, err := s.x.ResumeStale(ctx); err != nil || n < 1 {
			t.Fatalf("stale pass: %d, %v", n, err)
		}
		r, err := s.runs.Get(ctx, stale.ID)
		if err != nil || r.Status != runs.StatusCompleted || len(r.Log) != 7 || r.Log[1].Type != EventWorkflowRestored {
			t.Fatalf("resumed by the stale pass: %v %s %v", err, r.Status, logTypes(r))
		}

		held := runs.NewRun("acme", webhook.WorkflowMultiNode, json.RawMessage(`{}`), time.Now())
		if err := s.runs.Create(ctx, held); err != nil {
			t.Fatal(err)
		}
		s.x.Test.Held = func(_ context.Context, id string) bool { return id == held.ID }
		if retry := s.x.HandleRecords(ctx, []stream.StreamRecord{insert("held-1", held)}); len(retry) != 1 || retry[0] != "held-1" {
			t.Fatalf("a held run's record: retry %v", retry)
		}
		if r, err := s.runs.Get(ctx, held.ID); err != nil || r.Status != runs.StatusPending || r.Failures != 0 {
			t.Fatalf("a held run: %v %s, %d failures", err, r.Status, r.Failures)
		}
		s.x.Test.Held = nil
		if retry := s.x.HandleRecords(ctx, []stream.StreamRecord{insert("held-2", held)}); retry != nil {
			t.Fatalf("released: retry %v", retry)
		}
		if r, _ := s.runs.Get(ctx, held.ID); r.Status != runs.StatusCompleted {
			t.Fatalf("released run: %s", r.Status)
		}
	})
}
