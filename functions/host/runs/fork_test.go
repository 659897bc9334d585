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
