package runs

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/idemkit/idemkit/ledger/identity"
)

// ForkMode is a fork's mode (forkRun `mode`).
type ForkMode string

// The fork modes.
const (
	// ForkReplay re-executes the source from fromSeq against current code,
	// its side-effecting nodes resolved from the source run's recorded
	// outcomes (ledger.Ledger.Replay), never performed.
	ForkReplay ForkMode = "replay"
	// ForkBranch starts an independent run from the projected state at
	// fromSeq: its effects at and after fromSeq fire, as the operator asked.
	ForkBranch ForkMode = "branch"
)

// Fork is what a forked run records about its source (Run.Fork), fixed at
// creation.
type Fork struct {
	// SourceRunID is the run forked (same tenant).
	SourceRunID string `json:"sourceRunId"`
	// Mode is replay or branch.
	Mode ForkMode `json:"mode"`
	// FromSeq is the first re-executed sequence: the source's events with
	// sequence < FromSeq are the fork's fixed history (Inherited).
	FromSeq int64 `json:"fromSeq"`
	// Inherited holds the source's events with sequence < FromSeq, copied
	// verbatim (eventId, type, nodeId, payload and timestamp as the source
	// served them); the fork's log serves them under its own runId, each
	// with an eventId of the fork's own (the kept eventId is the source's).
	Inherited []InheritedEvent `json:"inherited,omitempty"`
	// BranchStamps are the host's selected recipes at fork time: the
	// identities of the fork's NEW effects (branch work) are derived under
	// them. The fork's own Run.Stamps are the source's, inherited for
	// the recorded history (a replay resolves the source's effects under the
	// recipes they were recorded with).
	BranchStamps identity.Stamps `json:"branchStamps"`
	// Ancestry is the chain of runs the fork's recorded history comes
	// from, nearest first: the source, then the source's source, back to
	// the run that is no fork. A replay resolves each execution it
	// re-executes from the run of this chain that recorded it, under the
	// stamps that run identified it with (RecordOf). Empty on a fork
	// created before the chain was kept: RecordOf then reads the source
	// under the fork's own RecipeStamps.
	Ancestry []Ancestor `json:"ancestry,omitempty"`
	// Recorded holds the source's node events with sequence >= FromSeq as
	// the source served them when the fork was created (its terminal run
	// event excluded), with its run.paused events among them (one naming
	// a node cut that node's attempt: CutStarts): what a replay's
	// re-execution is compared with to detect divergence (package
	// divergence). A fork created before the run.paused events were kept
	// holds node events only. SourceComplete reports
	// whether the source was terminal then, so its recorded events were
	// all it would ever have.
	Recorded       []InheritedEvent `json:"recorded,omitempty"`
	SourceComplete bool             `json:"sourceComplete,omitempty"`
	// Unreadable is set on a run whose stored fork description could not
	// be read (RED_TEAM 472): its source, mode and point are unknown, so
	// it reads as a replay (every seam denies) and the executor fails it
	// (ErrForkUnreadable), never executing it as a live run. Never stored.
	Unreadable bool `json:"-"`
}

// ErrForkUnreadable is the error of executing a run whose fork
// description could not be read (Fork.Unreadable): it ends failed, and
// nothing of it is performed.
var ErrForkUnreadable = errors.New("host: the run is a fork whose description cannot be read; it is not executed")

// Ancestor is one run of a fork's ancestry, as RecordOf reads it.
type Ancestor struct {
	// RunID is the run.
	RunID string `json:"runId"`
	// Mode is its fork mode; "" for a run that is no fork.
	Mode ForkMode `json:"mode,omitempty"`
	// Stamps are the recipe stamps its own executions' effects were
	// identified with (Run.EffectStamps): a branch's BranchStamps, any other
	// run's RecipeStamps.
	Stamps identity.Stamps `json:"stamps"`
	// Inherited counts, per node, the terminal events (node.completed,
	// node.failed) in its inherited prefix: the node's executions 1..k that
	// it did not execute itself but took from its own source.
	Inherited map[string]int `json:"inherited,omitempty"`
	// CreatedAt is its creation: its records of the executions it
	// performed are kept the ledger's retention after them
	// (RecordsSince). Zero on a fork created before it was kept.
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// NewFork returns a new pending fork of src in mode from fromSeq, with the
// source's events before fromSeq (inherited, as the events API serves
// them): the source's workflow, inputs, RunOptions and tenant; the source's recipe
// stamps (Stamps: the recorded history it is rooted in) and the
// host's current ones for its own new effects (BranchStamps); and its
// ancestry (src, then src's own ancestry), so every recorded execution is
// resolved under the stamps it was recorded with (RecordOf).
func NewFork(src Run, mode ForkMode, fromSeq int64, inherited []InheritedEvent, now time.Time) Run {
	f := NewRun(src.Tenant, src.WorkflowID, src.Inputs, now)
	f.Stamps = src.Stamps
	f.Options = src.Options
	a := Ancestor{RunID: src.ID, Stamps: src.EffectStamps(), CreatedAt: src.CreatedAt}
	ancestry := []Ancestor{a}
	if src.Fork != nil {
		a.Mode = src.Fork.Mode
		for _, e := range src.Fork.Inherited {
			if e.NodeID != "" && (e.Type == EventNodeCompleted || e.Type == EventNodeFailed) {
				if a.Inherited == nil {
					a.Inherited = map[string]int{}
				}
				a.Inherited[e.NodeID]++
			}
		}
		ancestry = append([]Ancestor{a}, src.Fork.Ancestry...)
	}
	f.Fork = &Fork{SourceRunID: src.ID, Mode: mode, FromSeq: fromSeq, Inherited: inherited,
		BranchStamps: identity.CurrentStamps(), Ancestry: ancestry}
	return f
}

// NewRetry returns the new pending run POST /runs/{runId}/retry starts
// from failed: the failed run's workflow, inputs and RunOptions, linked to
// it by RetryOf. A retry of a replay fork is itself a replay fork of the
// same source, from the same point, in the same mode (RED_TEAM 442): it
// carries the failed fork's Fork (source, mode, fromSeq, inherited prefix,
// ancestry, the source's recorded events as the fork kept them) and its
// recipe stamps, so its side-effecting nodes are resolved from the
// source's record, never performed, and fail closed
// (replay_source_missing) where the source recorded no outcome, as the
// fork's did. A retry of a branch fork is a branch of the same source from
// the same point (RED_TEAM 471): it inherits the branch's fixed history
// (the executions the source performed before fromSeq are not performed
// again) and re-fires what the branch re-fired, under its own identities
// and the host's current stamps (BranchStamps). A retry of a run that is
// no fork is a live run of its own with the host's current stamps.
func NewRetry(failed Run, now time.Time) Run {
	r := NewRun(failed.Tenant, failed.WorkflowID, failed.Inputs, now)
	r.RetryOf = failed.ID
	r.Options = failed.Options // the same request's RunOptions
	if failed.Fork != nil {
		f := *failed.Fork
		f.Inherited, f.Ancestry, f.Recorded = slices.Clone(f.Inherited), slices.Clone(f.Ancestry), slices.Clone(f.Recorded)
		if f.Mode == ForkBranch {
			f.BranchStamps = r.Stamps // the host's current ones, as NewRun set them
		}
		r.Fork, r.Stamps = &f, failed.Stamps
	}
	return r
}

// RecordOf returns the run whose ledger record holds execution n (from 1)
// of nodeID as a replay fork r re-executes it, and the recipe stamps that
// run identified the execution's effect with (recipe stamps: recorded
// history is resolved under the stamps it was recorded with, never the
// host's current ones). It walks r's ancestry from the source: a replay
// ancestor executed nothing itself (its executions were resolved from its
// own source), and a branch ancestor took executions 1..Inherited[nodeID]
// from its source; the first ancestor that performed the execution is the
// answer. Ordinals agree along the chain, since each fork's inherited
// prefix counts toward its ordinals. A fork without ancestry answers its
// source under its own RecipeStamps.
func (r Run) RecordOf(nodeID string, n int) (runID string, stamps identity.Stamps) {
	if r.Fork == nil {
		return r.ID, r.EffectStamps()
	}
	if len(r.Fork.Ancestry) == 0 {
		return r.Fork.SourceRunID, r.Stamps
	}
	for _, a := range r.Fork.Ancestry {
		if a.Mode == "" || (a.Mode == ForkBranch && n > a.Inherited[nodeID]) {
			return a.RunID, a.Stamps
		}
	}
	// The chain ends at a fork created before ancestry was kept: its
	// record is the nearest one known (a miss fails the node closed).
	last := r.Fork.Ancestry[len(r.Fork.Ancestry)-1]
	return last.RunID, last.Stamps
}

// RecordsSince is the earliest creation time of the runs whose ledger
// records a replay fork of r may resolve its executions from (RecordOf):
// r's own, and each of its ancestors that performed executions (the run
// the chain started from, a branch). A replay of r needs those records
// still kept, and each is kept the ledger's retention after it was
// written, never before its run was created (RED_TEAM 470). An ancestor
// whose creation time was not kept (a fork created before it was) is not
// counted.
func (r Run) RecordsSince() time.Time {
	since := r.CreatedAt
	if r.Fork == nil {
		return since
	}
	for _, a := range r.Fork.Ancestry {
		if a.Mode != ForkReplay && !a.CreatedAt.IsZero() && a.CreatedAt.Before(since) {
			since = a.CreatedAt
		}
	}
	return since
}

// SourceRecordsSince is, for a fork r, its source's RecordsSince as r's
// ancestry records it (its first ancestor is the source): the bound a
// fresh replay fork of r's source is held to, and so a retry of a replay
// fork, which is one (RED_TEAM 442, 510). ok is false when r is no fork or
// its ancestry keeps no creation time of its source (a fork created
// before the times were kept).
func (r Run) SourceRecordsSince() (since time.Time, ok bool) {
	if r.Fork == nil || len(r.Fork.Ancestry) == 0 || r.Fork.Ancestry[0].CreatedAt.IsZero() {
		return time.Time{}, false
	}
	since = r.Fork.Ancestry[0].CreatedAt
	for _, a := range r.Fork.Ancestry[1:] {
		if a.Mode != ForkReplay && !a.CreatedAt.IsZero() && a.CreatedAt.Before(since) {
			since = a.CreatedAt
		}
	}
	return since, true
}

// InheritedEvent is one event of a fork's fixed history, as the source
// served it.
type InheritedEvent struct {
	EventID   string          `json:"eventId"`
	Sequence  int64           `json:"sequence"`
	Type      string          `json:"type"`
	NodeID    string          `json:"nodeId,omitempty"`
	Timestamp string          `json:"timestamp"`
	Payload   json.RawMessage `json:"payload"`
}

// IsReplay reports whether r is a replay fork.
func (r Run) IsReplay() bool { return r.Fork != nil && r.Fork.Mode == ForkReplay }

// EffectStamps are the recipe stamps the run's NEW effects are identified
// with: a fork's BranchStamps, any other run's own stamps.
func (r Run) EffectStamps() identity.Stamps {
	if r.Fork != nil && r.Fork.BranchStamps.Validate() == nil {
		return r.Fork.BranchStamps
	}
	return r.Stamps
}

// RestartedNode is the node a fork's inherited prefix leaves open: the
// prefix's last node event is that node's node.started, so fromSeq falls
// inside its execution. The fork re-executes it from its start and records
// a fresh node.started for it first (the prefix boundary is exclusive: the
// source's event at fromSeq is re-executed, never carried over). "" when
// r is no fork or its prefix leaves no node open, an attempt an immediate
// pause cut in the prefix included (run.paused naming it, OpenNode): the
// node is started afresh then, as the source started it after its resume
// (RED_TEAM 469).
func (r Run) RestartedNode() string {
	if r.Fork == nil {
		return ""
	}
	log := make([]LogEvent, len(r.Fork.Inherited))
	for i, e := range r.Fork.Inherited {
		log[i] = LogEvent{Type: e.Type, NodeID: e.NodeID, Payload: e.Payload}
	}
	node, _ := OpenNode(log)
	return node
}
