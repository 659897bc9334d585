package runs

import (
	"encoding/json"

	"github.com/idemkit/idemkit/ledger"
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
	// served them); the fork's log serves them under its own runId.
	Inherited []InheritedEvent `json:"inherited,omitempty"`
	// BranchStamps are the host's selected recipes at fork time: the
	// identities of the fork's NEW effects (branch work) are derived under
	// them. The fork's own Run.RecipeStamps are the source's, inherited for
	// the recorded history (a replay resolves the source's effects under the
	// recipes they were recorded with).
	BranchStamps ledger.RecipeStamps `json:"branchStamps"`
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
func (r Run) EffectStamps() ledger.RecipeStamps {
	if r.Fork != nil && r.Fork.BranchStamps.Validate() == nil {
		return r.Fork.BranchStamps
	}
	return r.RecipeStamps
}
