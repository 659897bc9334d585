package apifn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestBreachedRunReadsValid: a run a breached cap ended (its runTimeoutMs
// while a node held, its maxLoopIterations between nodes) reads back
// valid against the closed schemas: getRun's snapshot
// (run-snapshot.schema.json) with error.code the registry code, the poll
// answer, every event a RunEventDoc whose payload validates against the
// entry of its type (cap.breached: capBreached; run.failed: runFailed;
// node.started: nodeStarted), cap.breached right before run.failed.
func TestBreachedRunReadsValid(t *testing.T) {
	o := wireschema.Load(t)
	snapSch, _, err := o.Response("GET", "/runs/{runId}", 200)
	if err != nil {
		t.Fatal(err)
	}
	pollSch, _, err := o.Response("GET", "/runs/{runId}/events/poll", 200)
	if err != nil {
		t.Fatal(err)
	}
	evSch, err := o.Schema("run-event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	payloadSch := map[string]string{runs.EventCapBreached: "capBreached", EventRunFailed: "runFailed",
		EventRunStarted: "runStarted", runs.EventNodeStarted: "nodeStarted"}
	for _, c := range []struct {
		code, payload, nodeID string
	}{
		{"run_timeout", `{"kind":"run-duration","limit":1000,"observed":1000,"nodeId":"hold"}`, "hold"},
		{"loop_limit_exceeded", `{"kind":"loop-iterations","limit":1,"observed":2,"nodeId":"effect"}`, ""},
	} {
		f := newFixture(t)
		ctx := context.Background()
		now := time.Now().UTC()
		r := runs.NewRun("acme", webhook.WorkflowReplaySideEffect, json.RawMessage(`{"delayMs":30000}`), now)
		r.Options.Configurable = json.RawMessage(`{"version":1,"run":{"runTimeoutMs":1000,"maxLoopIterations":1}}`)
		if err := f.runs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		running, err := f.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
		if err != nil {
			t.Fatal(err)
		}
		if c.nodeID != "" {
			if _, err := f.runs.AppendLog(ctx, r.ID, running.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: c.nodeID, At: now,
				Payload: json.RawMessage(`{"nodeId":"` + c.nodeID + `","typeId":"core.conformance.hold"}`)}}, now); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.runs.Breach(ctx, r.ID, runs.LogEvent{Type: runs.EventCapBreached, At: now.Add(time.Second), Payload: json.RawMessage(c.payload)},
			c.code, "the cap was breached", now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}

		snap, m := f.do(t, ev("GET", "/runs/"+runs.ProjectID(r.ID), "acme", "", ""))
		if err := wireschema.Validate(snapSch, []byte(snap.Body)); err != nil {
			t.Fatalf("%s: the snapshot against run-snapshot.schema.json: %v\n%s", c.code, err, snap.Body)
		}
		if e, _ := m["error"].(map[string]any); m["status"] != "failed" || e["code"] != c.code {
			t.Fatalf("%s: snapshot %s", c.code, snap.Body)
		}
		poll, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(r.ID)+"/events/poll", "acme", "", ""))
		if err := wireschema.Validate(pollSch, []byte(poll.Body)); err != nil {
			t.Fatalf("%s: the poll answer: %v\n%s", c.code, err, poll.Body)
		}
		var types []string
		for _, raw := range rawEvents(t, f, r.ID) {
			if err := wireschema.Validate(evSch, raw); err != nil {
				t.Fatalf("%s: event %s against run-event.schema.json: %v", c.code, raw, err)
			}
			var e struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			types = append(types, e.Type)
			def, ok := payloadSch[e.Type]
			if !ok {
				t.Fatalf("%s: unexpected event %s", c.code, raw)
			}
			ps, err := o.Schema("run-event-payloads.schema.json#/$defs/" + def)
			if err != nil {
				t.Fatal(err)
			}
			if err := wireschema.Validate(ps, e.Payload); err != nil {
				t.Fatalf("%s: %s payload against %s: %v\n%s", c.code, e.Type, def, err, e.Payload)
			}
			if e.Type == EventRunFailed {
				var p struct {
					Error struct{ Code string } `json:"error"`
				}
				if json.Unmarshal(e.Payload, &p); p.Error.Code != c.code {
					t.Fatalf("%s: run.failed %s", c.code, e.Payload)
				}
			}
		}
		if n := len(types); n < 3 || types[n-2] != runs.EventCapBreached || types[n-1] != EventRunFailed {
			t.Fatalf("%s: events %v, want cap.breached then run.failed last", c.code, types)
		}
	}
}
