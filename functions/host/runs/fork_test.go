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

// TestNewRetryOfAReplayForkIsTheSameReplay: a retry of a replay fork
// (RED_TEAM 442) carries the fork's source, mode, fromSeq, prefix,
// ancestry, recorded events and recipe stamps, so it resolves every
// execution from the run the fork resolves it from; a retry of a retry,
// and a replay fork of the retry, too. A retry of a branch fork, and of a run that is no fork, carries no
// fork and the host's current stamps. Every retry is a new pending run of
// the failed run's tenant, workflow, inputs and options, linked by
// RetryOf.
func TestNewRetryOfAReplayForkIsTheSameReplay(t *testing.T) {
	now := time.Now()
	old := identity.Stamps{ActivityIdentityRecipe: "a-v1", SemanticRequestRecipe: "s-v1"}
	orig := NewRun("acme", "wf", []byte(`{"x":1}`), now)
	orig.Stamps = old
	orig.Options.Tags = []byte(`["t"]`)
	branch := NewFork(orig, ForkBranch, 3, []InheritedEvent{
		{Sequence: 0, Type: "run.started"},
		{Sequence: 1, Type: EventNodeStarted, NodeID: "n1"}, {Sequence: 2, Type: EventNodeCompleted, NodeID: "n1"},
	}, now)
	rep := NewFork(branch, ForkReplay, 1, []InheritedEvent{{Sequence: 0, Type: "run.started"}}, now)
	rep.Fork.Recorded = []InheritedEvent{{Sequence: 1, Type: EventNodeStarted, NodeID: "n1"}}
	rep.Fork.SourceComplete = true
	retry := NewRetry(rep, now)
	again := NewRetry(retry, now)
	// A replay fork of the retry resolves as the fork does too: the retry
	// is a replay ancestor, which executed nothing itself.
	forkOfRetry := NewFork(retry, ForkReplay, 0, nil, now)
	for _, c := range []struct {
		node string
		n    int
	}{{"n1", 1}, {"n1", 2}, {"n2", 1}} {
		id, st := forkOfRetry.RecordOf(c.node, c.n)
		if wid, wst := rep.RecordOf(c.node, c.n); id != wid || st != wst {
			t.Fatalf("%s #%d: a fork of the retry resolves from %s %+v, the retried fork from %s %+v", c.node, c.n, id, st, wid, wst)
		}
	}
	for _, r := range []struct {
		r      Run
		failed Run
	}{{retry, rep}, {again, retry}} {
		if r.r.ID == r.failed.ID || r.r.RetryOf != r.failed.ID || r.r.Status != StatusPending || r.r.Tenant != "acme" ||
			r.r.WorkflowID != "wf" || string(r.r.Inputs) != `{"x":1}` || string(r.r.Options.Tags) != `["t"]` {
			t.Fatalf("retry %+v of %s", r.r, r.failed.ID)
		}
		if !r.r.IsReplay() || r.r.Fork == rep.Fork || r.r.Fork.SourceRunID != branch.ID || r.r.Fork.FromSeq != 1 ||
			len(r.r.Fork.Inherited) != 1 || len(r.r.Fork.Recorded) != 1 || !r.r.Fork.SourceComplete ||
			len(r.r.Fork.Ancestry) != len(rep.Fork.Ancestry) || r.r.Stamps != rep.Stamps || r.r.Fork.BranchStamps != rep.Fork.BranchStamps {
			t.Fatalf("the retry's fork %+v stamps %+v; want the failed replay fork's %+v %+v", r.r.Fork, r.r.Stamps, rep.Fork, rep.Stamps)
		}
		for _, c := range []struct {
			node string
			n    int
		}{{"n1", 1}, {"n1", 2}, {"n2", 1}} {
			id, st := r.r.RecordOf(c.node, c.n)
			if wid, wst := rep.RecordOf(c.node, c.n); id != wid || st != wst {
				t.Fatalf("%s #%d: the retry resolves from %s %+v, the fork from %s %+v", c.node, c.n, id, st, wid, wst)
			}
		}
	}
	if r := NewRetry(orig, now); r.Fork != nil || r.Stamps != identity.CurrentStamps() || r.RetryOf != orig.ID {
		t.Fatalf("the retry of %s: fork %+v stamps %+v", orig.ID, r.Fork, r.Stamps)
	}
	// A retry of a branch is a branch of the same source from the same
	// point (RED_TEAM 471): the branch's history and stamps for it, the
	// host's current stamps for its own work.
	branch.Fork.BranchStamps = old
	r := NewRetry(branch, now)
	if r.RetryOf != branch.ID || r.IsReplay() || r.Fork == nil || r.Fork == branch.Fork || r.Fork.Mode != ForkBranch ||
		r.Fork.SourceRunID != orig.ID || r.Fork.FromSeq != 3 || len(r.Fork.Inherited) != 3 || len(r.Fork.Ancestry) != 1 ||
		r.Stamps != branch.Stamps || r.Fork.BranchStamps != identity.CurrentStamps() || r.EffectStamps() != identity.CurrentStamps() {
		t.Fatalf("the retry of the branch: fork %+v stamps %+v", r.Fork, r.Stamps)
	}
}
