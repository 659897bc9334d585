package conflictaudit

import (
	"log/slog"
)

// Layer-1 conflicts: one Idempotency-Key that created two runs, one in each
// region. Under reconciled-records each region claims a key on its local
// replica of the idempotency table, so a key sent to both regions within
// the replication lag or during a partition runs in both, and each region
// records the run it created. DynamoDB's own replication then keeps the
// later write, a time-ordered rule the OpenWOP partition rule removes
// (under a partition there is no shared clock). The survivor is instead
// the record naming the lexicographically lowest run id
// (PartitionRecoveryLexMin): deterministic and the same whichever write
// arrived last. The change that shows the conflict is a MODIFY of a record
// whose old and new images name different runs: a region whose own record
// was overwritten by the other region's. Where the survivor is the OLD
// image (the lower run lost to replication), the region restores it, and
// that write replicates to the other region as the newest one; where it is
// the new image, nothing is written. Replication may deliver the other
// region's claim before its completion: a record that named a run
// overwritten by another claim still pending (its run not known yet) is
// held, restored as it was (HoldKey), without an event (so is one
// overwritten by a record whose execution ended without a run); the restore reaches
// the other region as the newest write, where the two runs are compared in
// full. Each region thus writes back only a record naming a lower run than
// the one it overwrote, or one whose rival named none yet, so the two
// regions end on the lowest run id whatever the order of the writes.
//
// The two records need not come from two first claims: a region that sees
// the other region's replicated claim with its lease ended (a clock ahead,
// or renewals that did not replicate) takes it over, and a takeover keeps
// the first claim's request id. So two images are told apart by the runs
// they name, never by their request ids: within one region a record that
// names a run is final and never changes to name another (only its
// retention's end lets a new claim in, and that claim names none yet).

// PartitionRecoveryLexMin is the rule a Layer-1 conflict is resolved by:
// the lower runId wins (the OpenWOP partitionRecoveryStrategy value).
const PartitionRecoveryLexMin = "lexicographic-min-run-id"

// KindKey is the Kind of a Layer-1 conflict (effect and slot are Layer 2's).
const KindKey = "key"

// ReasonTwoRuns is the Reason of a Layer-1 conflict.
const ReasonTwoRuns = "one-key-two-runs"

// KeyRecord is one image of a Layer-1 record as the auditor sees it.
type KeyRecord struct {
	// Record is the record id (keyspace.ID: a hash, never the raw key).
	Record string
	// RequestID is the id of the request that first claimed the record; a
	// takeover keeps it, so two regions' records of one key may share it.
	RequestID string
	// Run is the run the key's execution created (the runId of its stored
	// answer); "" when it created none or is not known (still pending).
	Run string
	// Expired is true when the record's retention had ended: a record
	// created again after it is a new key's, not a conflict.
	Expired bool
	// Pending is true while the claim's execution has not completed.
	Pending bool
}

// KeyParty is one side of a Layer-1 conflict: the run it created.
type KeyParty struct {
	// Run is the run id (an opaque identifier; no content).
	Run string `json:"run"`
}

// KeyConflict is one Layer-1 conflict event.
type KeyConflict struct {
	// Event is always "cross_region_conflict".
	Event string `json:"event"`
	// Strategy is the deployment's posture (reconciled-records; under
	// fenced-effects only a region writing its own replica conflicts).
	Strategy string `json:"strategy"`
	// Region is where the conflict was observed.
	Region string `json:"region"`
	// Kind is always KindKey.
	Kind string `json:"kind"`
	// Record is the opaque record reference (the keyed hash of its id,
	// Config.KeyHashSecret).
	Record string `json:"record"`
	// Winner is the run the record converges on (the lower run id, or,
	// under ObserveKeyKept, the run replication kept), Loser the other one.
	Winner KeyParty `json:"winner"`
	Loser  KeyParty `json:"loser"`
	// Reason is always ReasonTwoRuns.
	Reason string `json:"reason"`
	// Resolution is the rule applied: PartitionRecoveryLexMin, or
	// ResolutionNone where nothing is written back and the record keeps
	// the higher run (ObserveKeyKept).
	Resolution string `json:"resolution"`
	// Restore is true when the winner is the old image: this region writes
	// it back (the new image, the loser, came from replication).
	Restore bool `json:"restore"`
}

// DetectKey returns the Layer-1 conflict between a record's old and new
// images, or nil when the change is not one: a record re-created after its
// retention, an image naming no run (a claim's own transitions: its run is
// known only once it completes), or the same run. Two images naming two
// runs are a conflict whatever their request ids (a takeover keeps the
// first claim's).
func DetectKey(old, cur KeyRecord) *KeyConflict {
	if old.Record == "" || old.Record != cur.Record || old.Expired ||
		old.Run == "" || cur.Run == "" || old.Run == cur.Run {
		return nil
	}
	c := &KeyConflict{Event: "cross_region_conflict", Kind: KindKey, Record: old.Record,
		Winner: KeyParty{Run: cur.Run}, Loser: KeyParty{Run: old.Run}, Reason: ReasonTwoRuns, Resolution: PartitionRecoveryLexMin}
	if old.Run < cur.Run {
		c.Winner, c.Loser, c.Restore = c.Loser, c.Winner, true
	}
	return c
}

// HoldKey reports whether a record's old image, naming a run, was
// overwritten by another region's claim or takeover still pending (no run
// known yet; within one region a record naming a run is final, so only a
// claim after its retention follows it, and that one is not held):
// the old image is then restored as it was, so the runs are compared once
// the other claim's run is known (in the region that receives the
// restore). Not a conflict event: the loser is not known yet. The same
// holds where the other region's record names no run because its
// execution ended without one (its claim released to be retried, or an
// answer that creates none, such as a 404): the old image names the key's
// only run and is restored over it. That end can arrive without its claim
// (replication discards a claim older than this region's record), and
// replication alone would keep it, the key's newest write, and let the
// key's next request create a second run.
func HoldKey(old, cur KeyRecord) bool {
	return old.Record != "" && old.Record == cur.Record && !old.Expired &&
		old.Run != "" && cur.Run == ""
}

// ResolutionNone is the Resolution of a Layer-1 conflict left as
// replication left it (ObserveKeyKept): no rule was applied, and the
// record keeps the run the newest write names.
const ResolutionNone = "none"

// ObserveKey audits one change of a Layer-1 record. A conflict is logged,
// counted (MetricConflicts, kind "key") and returned; otherwise nil. The
// record id appears only as its keyed hash (Config.KeyHashSecret). The event states the rule's
// outcome: where the old image names the lower run it is the winner and
// Restore is true, for the caller writes it back.
func (a *Auditor) ObserveKey(old, cur KeyRecord) *KeyConflict {
	return a.observeKey(DetectKey(old, cur))
}

// ObserveKeyKept is ObserveKey for a change nothing is written back over
// (an auditor with no table to write: under fenced-effects, or
// reconciled-records without one): the record keeps the new image's run,
// so that run is the winner whichever is lower, Restore is false, and
// Resolution is PartitionRecoveryLexMin only where the kept run is the
// lower, ResolutionNone otherwise.
func (a *Auditor) ObserveKeyKept(old, cur KeyRecord) *KeyConflict {
	c := DetectKey(old, cur)
	if c != nil && c.Restore {
		c.Winner, c.Loser, c.Restore, c.Resolution = c.Loser, c.Winner, false, ResolutionNone
	}
	return a.observeKey(c)
}

func (a *Auditor) observeKey(c *KeyConflict) *KeyConflict {
	if c == nil {
		return nil
	}
	c.Strategy, c.Region, c.Record = string(a.cfg.Strategy), a.cfg.Region, a.hash.Log(c.Record)
	dims := map[string]string{"strategy": c.Strategy, "kind": c.Kind}
	if a.cfg.Region != "" {
		dims["region"] = a.cfg.Region
	}
	a.cfg.Metrics.Count(MetricConflicts, 1, dims)
	a.cfg.Metrics.Count(MetricConflictsAll, 1, nil)
	a.cfg.Log.Warn("cross_region_conflict",
		slog.String("strategy", c.Strategy), slog.String("region", c.Region), slog.String("kind", c.Kind),
		slog.String("record", c.Record), slog.String("reason", c.Reason), slog.String("resolution", c.Resolution),
		slog.Any("winner", c.Winner), slog.Any("loser", c.Loser), slog.Bool("restore", c.Restore))
	return c
}
