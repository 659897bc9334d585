package divergence

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestDivergenceComparesNodeEventsInOrder: events agree when only their
// x- members differ; past the source's recorded events a complete source
// makes the fork's event "extra" and a source still running at fork time
// makes no comparison; a branch is never compared.
func TestDivergenceComparesNodeEventsInOrder(t *testing.T) {
	src := runs.NewRun("acme", "wf", nil, time.Now())
	rep := runs.NewFork(src, runs.ForkReplay, 1, []runs.InheritedEvent{{Sequence: 0, Type: "run.started"}}, time.Now())
	rep.Fork.Recorded = []runs.InheritedEvent{{EventID: "e1", Sequence: 1, Type: runs.EventNodeCompleted, NodeID: "n", Payload: []byte(`{"nodeId":"n","x-idemkit-effect":"performed"}`)}}
	ev := runs.LogEvent{Type: runs.EventNodeCompleted, NodeID: "n", Payload: []byte(`{"x-idemkit-effect":"resolved-from-source","nodeId":"n"}`)}
	if d := Of(rep, ev); d != nil {
		t.Fatalf("x- members compared: %+v", d)
	}
	rep.Log = []runs.LogEvent{ev, {Type: Event, Payload: []byte(`{}`)}}
	next := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "m", Payload: []byte(`{}`)}
	if d := Of(rep, next); d != nil {
		t.Fatalf("a source still running at fork time: %+v", d)
	}
	rep.Fork.SourceComplete = true
	if d := Of(rep, next); d == nil || d.DivergenceKind != Extra || d.AtSequence != 3 || d.OriginalEventID != "" {
		t.Fatalf("past a complete source: %+v", d)
	}
	br := rep
	br.Fork = &runs.Fork{Mode: runs.ForkBranch, Recorded: rep.Fork.Recorded, SourceComplete: true}
	if d := Of(br, next); d != nil {
		t.Fatalf("a branch compared: %+v", d)
	}
}

// TestDivergenceSkipsCutAttempts: an attempt an immediate pause cut (its
// node.started, then run.paused naming it) is no place to compare, in the
// source or in the replay: a replay of a source paused that way agrees
// with it event for event, and a replay cut the same way agrees too.
func TestDivergenceSkipsCutAttempts(t *testing.T) {
	src := runs.NewRun("acme", "wf", nil, time.Now())
	rep := runs.NewFork(src, runs.ForkReplay, 1, []runs.InheritedEvent{{Sequence: 0, Type: "run.started"}}, time.Now())
	started := []byte(`{"nodeId":"a","typeId":"core.noop"}`)
	cut := []byte(`{"drainPolicy":"immediate","interruptedNodeId":"a","interruptedAttempt":1}`)
	rep.Fork.SourceComplete = true
	rep.Fork.Recorded = []runs.InheritedEvent{
		{EventID: "e1", Sequence: 1, Type: runs.EventNodeStarted, NodeID: "a", Payload: started},
		{EventID: "e2", Sequence: 2, Type: runs.EventRunPaused, Payload: cut},
		{EventID: "e3", Sequence: 3, Type: runs.EventRunResumed, Payload: []byte(`{}`)},
		{EventID: "e4", Sequence: 4, Type: runs.EventNodeStarted, NodeID: "a", Payload: started},
		{EventID: "e5", Sequence: 5, Type: runs.EventNodeCompleted, NodeID: "a", Payload: []byte(`{"nodeId":"a","outputs":{}}`)},
	}
	start := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "a", Payload: started}
	done := runs.LogEvent{Type: runs.EventNodeCompleted, NodeID: "a", Payload: []byte(`{"nodeId":"a","outputs":{}}`)}
	if d := Of(rep, start); d != nil {
		t.Fatalf("the replay's start: %+v", d)
	}
	rep.Log = []runs.LogEvent{start}
	if d := Of(rep, done); d != nil {
		t.Fatalf("the replay's end, after a source whose attempt was cut: %+v", d)
	}
	// The replay cut the same way, then started afresh.
	rep.Log = []runs.LogEvent{start, {Type: runs.EventRunPaused, Payload: cut}, {Type: runs.EventRunResumed, Payload: []byte(`{}`)}, start}
	if d := Of(rep, done); d != nil {
		t.Fatalf("a replay whose own attempt was cut: %+v", d)
	}
}
