package apifn

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestForkRunDynamo: forkRun on RunsTable and IdempotencyTable on the
// emulators. Its round trips are a contract: a first execution reads the
// source (one GetItem) and costs what createRun costs under Layer 1 (the
// claim, then the run written with the completion); a retry of the key is
// answered from its record alone, as a retried createRun (the source is not
// read again). The fork item keeps its prefix, ancestry
// and the source's recorded events through the table, and serves the
// prefix byte for byte.
func TestForkRunDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		store, st := dynamoStores(t, e, c, false)
		f := hostOf(t, store, idem.Config{Store: st}, nil)
		// The source: the looped fixture's recorded log, completed.
		now := time.Now().UTC()
		src := runs.NewRun("acme", "conformance-replay-ordinal-loop", json.RawMessage(`{"delayMs":1}`), now)
		if err := store.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		running, err := store.Transition(ctx, src.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
		if err != nil {
			t.Fatal(err)
		}
		var log []runs.LogEvent
		for _, n := range []string{"start", "effect", "wait"} {
			log = append(log, runs.LogEvent{Type: runs.EventNodeStarted, NodeID: n, At: now, Payload: json.RawMessage(`{"nodeId":"` + n + `"}`)},
				runs.LogEvent{Type: runs.EventNodeCompleted, NodeID: n, At: now, Payload: json.RawMessage(`{"nodeId":"` + n + `","outputs":{}}`)})
		}
		if _, err := store.AppendLog(ctx, src.ID, running.Fence(), log, now); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Transition(ctx, src.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		body := `{"mode":"replay","fromSeq":3}`
		cnt.Reset()
		r1, m1 := f.fork(t, src.ID, "k-fork-dynamo-000000000001", body)
		first, firstOps := cnt.Total(), cnt.Ops()
		if r1.StatusCode != 201 {
			t.Fatalf("%d %s", r1.StatusCode, r1.Body)
		}
		cnt.Reset()
		r2, _ := f.fork(t, src.ID, "k-fork-dynamo-000000000001", body)
		replay, replayOps := cnt.Total(), cnt.Ops()
		if r2.StatusCode != 201 || r2.Body != r1.Body {
			t.Fatalf("retry: %d %s", r2.StatusCode, r2.Body)
		}
		cnt.Reset()
		rc, _ := f.do(t, ev("POST", "/runs", "acme", "k-create-dynamo-00000000001", `{"workflowId":"conformance-noop"}`))
		create, createOps := cnt.Total(), cnt.Ops()
		if rc.StatusCode != 201 {
			t.Fatalf("createRun: %d %s", rc.StatusCode, rc.Body)
		}
		cnt.Reset()
		if rc, _ := f.do(t, ev("POST", "/runs", "acme", "k-create-dynamo-00000000001", `{"workflowId":"conformance-noop"}`)); rc.StatusCode != 201 {
			t.Fatalf("createRun retry: %d %s", rc.StatusCode, rc.Body)
		}
		createReplay, createReplayOps := cnt.Total(), cnt.Ops()
		if first != create+1 || firstOps["GetItem"] != createOps["GetItem"]+1 {
			t.Fatalf("forkRun took %d round trips (%v), want createRun's %d (%v) plus the source's GetItem", first, firstOps, create, createOps)
		}
		if replay != createReplay || replayOps["GetItem"] != createReplayOps["GetItem"] {
			t.Fatalf("a retried fork took %d round trips (%v), want a retried createRun's %d (%v): the record alone, the source unread",
				replay, replayOps, createReplay, createReplayOps)
		}
		id, _ := m1["runId"].(string)
		fork, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if fork.Fork == nil || len(fork.Fork.Inherited) != 3 || len(fork.Fork.Ancestry) != 1 || fork.Fork.Ancestry[0].RunID != src.ID ||
			len(fork.Fork.Recorded) != 4 || !fork.Fork.SourceComplete || fork.Stamps != src.Stamps {
			t.Fatalf("fork as stored: %+v", fork.Fork)
		}
		srcEvs, got := rawEvents(t, f, src.ID), rawEvents(t, f, id)
		for i := 0; i < 3; i++ {
			if want := asForkServes(t, srcEvs[i], src.ID, id); !bytes.Equal(got[i], want) {
				t.Fatalf("event %d:\n fork   %s\n source %s", i, got[i], srcEvs[i])
			}
		}
	})
}
