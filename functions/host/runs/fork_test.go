package runs

import (
	"github.com/idemkit/idemkit/ledger/identity"
	"testing"
	"time"
)

// TestRecordOfWalksTheAncestry: a replay of a replay of a branch of an
// original run resolves each execution from the run that performed it,
// under that run's stamps: the branch's own executions from the branch,
// the ones it inherited from the original.
func TestRecordOfWalksTheAncestry(t *testing.T) {
	now := time.Now()
	old := identity.Stamps{ActivityIdentityRecipe: "a-v1", SemanticRequestRecipe: "s-v1"}
	orig := NewRun("acme", "wf", nil, now)
	orig.Stamps = old
	// The branch inherited two executions of n1 and none of n2.
	branch := NewFork(orig, ForkBranch, 6, []InheritedEvent{
		{Sequence: 0, Type: "run.started"},
		{Sequence: 1, Type: EventNodeStarted, NodeID: "n1"}, {Sequence: 2, Type: EventNodeCompleted, NodeID: "n1"},
		{Sequence: 3, Type: EventNodeStarted, NodeID: "n1"}, {Sequence: 4, Type: EventNodeFailed, NodeID: "n1"},
		{Sequence: 5, Type: EventNodeStarted, NodeID: "n2"},
	}, now)
	rep1 := NewFork(branch, ForkReplay, 0, nil, now)
	rep2 := NewFork(rep1, ForkReplay, 0, nil, now)
	cur := identity.CurrentStamps()
	for _, c := range []struct {
		node   string
		n      int
		run    string
		stamps identity.Stamps
	}{
		{"n1", 1, orig.ID, old},
		{"n1", 2, orig.ID, old},
		{"n1", 3, branch.ID, cur},
		{"n2", 1, branch.ID, cur},
	} {
		for _, r := range []Run{rep1, rep2} {
			if id, st := r.RecordOf(c.node, c.n); id != c.run || st != c.stamps {
				t.Errorf("%s execution %d: %s %+v, want %s %+v", c.node, c.n, id, st, c.run, c.stamps)
			}
		}
	}
	if rep2.Stamps != old || len(rep2.Fork.Ancestry) != 3 || rep2.Fork.Ancestry[2].RunID != orig.ID {
		t.Fatalf("rep2 stamps %+v ancestry %+v", rep2.Stamps, rep2.Fork.Ancestry)
	}
	// A fork recorded before ancestry was kept reads its source under its
	// own stamps.
	legacy := rep1
	legacy.Fork = &Fork{SourceRunID: branch.ID, Mode: ForkReplay}
	if id, st := legacy.RecordOf("n1", 1); id != branch.ID || st != legacy.Stamps {
		t.Fatalf("legacy fork: %s %+v", id, st)
	}
}

// TestDivergenceComparesNodeEventsInOrder: events agree when only their
// x- members differ; past the source's recorded events a complete source
// makes the fork's event "extra" and a source still running at fork time
// makes no comparison; a branch is never compared.
func TestDivergenceComparesNodeEventsInOrder(t *testing.T) {
	src := NewRun("acme", "wf", nil, time.Now())
	rep := NewFork(src, ForkReplay, 1, []InheritedEvent{{Sequence: 0, Type: "run.started"}}, time.Now())
	rep.Fork.Recorded = []InheritedEvent{{EventID: "e1", Sequence: 1, Type: EventNodeCompleted, NodeID: "n", Payload: []byte(`{"nodeId":"n","x-idemkit-effect":"performed"}`)}}
	ev := LogEvent{Type: EventNodeCompleted, NodeID: "n", Payload: []byte(`{"x-idemkit-effect":"resolved-from-source","nodeId":"n"}`)}
	if d := rep.Divergence(ev); d != nil {
		t.Fatalf("x- members compared: %+v", d)
	}
	rep.Log = []LogEvent{ev, {Type: EventReplayDiverged, Payload: []byte(`{}`)}}
	next := LogEvent{Type: EventNodeStarted, NodeID: "m", Payload: []byte(`{}`)}
	if d := rep.Divergence(next); d != nil {
		t.Fatalf("a source still running at fork time: %+v", d)
	}
	rep.Fork.SourceComplete = true
	if d := rep.Divergence(next); d == nil || d.DivergenceKind != DivergedExtra || d.AtSequence != 3 || d.OriginalEventID != "" {
		t.Fatalf("past a complete source: %+v", d)
	}
	br := rep
	br.Fork = &Fork{Mode: ForkBranch, Recorded: rep.Fork.Recorded, SourceComplete: true}
	if d := br.Divergence(next); d != nil {
		t.Fatalf("a branch compared: %+v", d)
	}
}
