// Package conflictaudit detects cross-region duplicate claims in the Layer-2
// effects table and records them as conflict events (fenced cross-region effect ownership: winner,
// loser, strategy and opaque effect ids, no content, no keys), counted in
// openwop.idempotency.cross_region_conflicts_total.
//
// Input is the effects table's stream, one change at a time, as decoded
// ledger records (the old and the new image). In an MREC global table a
// conflict is visible in exactly one place: the stream of the region whose
// write was overwritten by the other region's (last-writer-wins) write,
// where it appears as a MODIFY whose new image does not continue the old
// image's history:
//
//   - same attempt number, different owner token: two independent claims
//     (each region won its local insert-if-absent);
//   - a lower attempt number than before: an older lineage won;
//   - a different creation time for a record that was still live: the
//     record was created independently in each region;
//   - a higher attempt over a completed record: the other region reclaimed
//     a copy from before the completion (a completed record is never
//     reclaimed), so both regions' attempts fired;
//   - a higher attempt over a claimed or firing record, taken over before
//     that record's lease ended: the other region reclaimed a copy whose
//     lease had not been renewed there (a partition), or judged it on a
//     clock ahead of this region's.
//
// A legitimate transition (fire mark, outcome, release, atomic reclaim,
// re-creation after retention) never matches. Detection is per change and
// stateless, so the auditor can run as a Lambda on each region's stream.
// This package never imports the AWS SDK: the caller decodes stream images
// (ledger/dynamostore's item shape) into ledger records.
package conflictaudit

import (
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"

	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/keyhash"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
)

// MetricConflicts counts cross-region duplicate claims. Dimensions (bounded):
// "strategy" (the posture), "kind" (effect, slot, or key for a Layer-1 conflict), "region" (where the
// conflict was observed).
const MetricConflicts = "openwop.idempotency.cross_region_conflicts_total"

// MetricConflictsAll counts the same conflicts with no dimension, one
// series per stack, for an alarm: MetricConflicts' dimensions differ from
// stack to stack (strategy and region).
const MetricConflictsAll = "idemkit.audit.cross_region_conflicts_total"

// Party is one side of a conflict: an opaque description of an attempt
// lineage, with no content and no key.
type Party struct {
	// Attempt is the record's attempt number.
	Attempt int `json:"attempt"`
	// Owner is an opaque reference to the owner token (a keyed hash,
	// Config.KeyHashSecret).
	Owner string `json:"owner"`
	// State is the record state (claimed, firing, released, completed).
	State string `json:"state"`
	// FireMarked is true when the lineage's current attempt passed its
	// local fire mark (under reconciled-records, whose ledger has no Fencer,
	// that is its claim: it may have reached the provider).
	FireMarked bool `json:"fireMarked"`
	// Fence is the fencing token of the fire mark (0: unfenced).
	Fence uint64 `json:"fence,omitempty"`
}

// Conflict is one conflict event.
type Conflict struct {
	// Event is always "cross_region_conflict".
	Event string `json:"event"`
	// Strategy is the deployment's posture (reconciled-records or
	// fenced-effects).
	Strategy fence.CrossRegion `json:"strategy"`
	// Region is where the conflict was observed: the region whose replica
	// the other region's write overwrote.
	Region string `json:"region"`
	// Kind is effect or slot.
	Kind string `json:"kind"`
	// Effect is the opaque effect reference (Config.EffectRef).
	Effect string `json:"effect"`
	// Winner is the write the replicas keep, Loser the other: the new
	// image and the old one it overwrote, or, where the old image was
	// written back over the new (ObserveWrittenBack), the other way round.
	Winner Party `json:"winner"`
	Loser  Party `json:"loser"`
	// Reason says which rule detected it: "same-attempt-other-owner",
	// "attempt-regressed", "independent-creation",
	// "completed-then-reclaimed" (a completed record overwritten by a
	// later attempt: a region that never saw the completion reclaimed it)
	// or "reclaimed-within-lease" (an attempt overwritten by a reclaim made
	// before its lease, renewed where it ran, ended).
	Reason string `json:"reason"`
}

// Detect returns the conflict between a stream change's old and new images,
// or nil when the change is a legitimate transition (or not a MODIFY).
// Region and Strategy are left empty; Effect and owners are unhashed
// (Auditor fills them).
func Detect(old, cur *ledger.Record) *Conflict {
	if old == nil || cur == nil || old.Key != cur.Key {
		return nil
	}
	reason := ""
	switch {
	case !old.Live(cur.CreatedAt) && !cur.CreatedAt.Equal(old.CreatedAt):
		return nil // re-created after the old record's retention: a new effect
	case cur.Attempt == old.Attempt && cur.Owner != old.Owner:
		reason = "same-attempt-other-owner"
	case cur.Attempt < old.Attempt:
		reason = "attempt-regressed"
	case !cur.CreatedAt.Equal(old.CreatedAt):
		reason = "independent-creation"
	case cur.Attempt > old.Attempt && old.State == ledger.StateCompleted:
		reason = "completed-then-reclaimed"
	case cur.Attempt > old.Attempt && (old.State == ledger.StateClaimed || old.State == ledger.StateFiring) &&
		reclaimedWithinLease(old, cur):
		reason = "reclaimed-within-lease"
	default:
		return nil
	}
	kind := string(cur.Kind)
	if kind == "" {
		kind = string(identity.KindEffect)
	}
	return &Conflict{Event: "cross_region_conflict", Kind: kind, Effect: cur.EffectID,
		Winner: party(cur), Loser: party(old), Reason: reason}
}

// reclaimedWithinLease reports whether cur took over old's attempt before
// old's lease ended: the reclaim (or resolution) of an attempt writes the
// time it took it over on that attempt's row, and a region reclaims only
// a lease it sees ended, so an earlier time means the lease it saw was not
// old's (renewed in another region, or judged on a clock ahead).
func reclaimedWithinLease(old, cur *ledger.Record) bool {
	for _, a := range cur.Attempts {
		if a.N == old.Attempt {
			return a.At.Before(old.LeaseUntil)
		}
	}
	return false
}

func party(r *ledger.Record) Party {
	p := Party{Attempt: r.Attempt, Owner: r.Owner, State: string(r.State), Fence: r.Fence}
	if n := len(r.Attempts); n > 0 {
		p.FireMarked = r.Attempts[n-1].Fired
	}
	return p
}

// Config configures an Auditor.
type Config struct {
	// Strategy is the deployment's posture, recorded on every event.
	// Required: reconciled-records or fenced-effects.
	Strategy fence.CrossRegion
	// Region is the region whose stream this auditor reads. Default "".
	Region string
	// Metrics receives MetricConflicts. Default nil: no metrics.
	Metrics *emf.Recorder
	// Log receives one JSON line per conflict (level WARN, message
	// "cross_region_conflict"). Default: discarded.
	Log *slog.Logger
	// KeyHashSecret keys the hashes that stand for a conflict's effect id,
	// owner tokens and Layer-1 record id (IDEMPOTENCY_KEY_HASH_SECRET, the
	// secret the api keys its log hashes with): every auditor holding the
	// same secret, in every region and container of one deployment, names
	// one record or effect alike, so events can be de-duplicated by record.
	// Default "": a random salt per process, as every function without the
	// secret (references then match within one process only).
	KeyHashSecret string
	// EffectRef renders an effect id for the event. Default the keyed hash
	// of KeyHashSecret: the provider idempotency key is derived from the
	// effect id, so the raw id never appears in logs.
	EffectRef func(effectID string) string
}

// Auditor records conflicts. Safe for concurrent use.
type Auditor struct {
	cfg  Config
	hash *keyhash.Hasher // Config.KeyHashSecret
}

// ErrConfig is matched (errors.Is) by every error New returns.
var ErrConfig = errors.New("conflictaudit: invalid config")

// New validates cfg and returns an Auditor, or an error listing every
// problem of cfg (matching ErrConfig).
func New(cfg Config) (*Auditor, error) {
	var p configerr.List
	if cfg.Strategy != fence.ReconciledRecords && cfg.Strategy != fence.FencedEffects {
		p.Addf("Config.Strategy must be reconciled-records or fenced-effects")
	}
	if err := p.Err("conflictaudit", ErrConfig); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	h := keyhash.New(cfg.KeyHashSecret)
	if cfg.EffectRef == nil {
		cfg.EffectRef = h.Log
	}
	return &Auditor{cfg: cfg, hash: h}, nil
}

// Observe audits one stream change (old and new images, either may be nil).
// A conflict is logged, counted and returned; otherwise Observe returns nil.
func (a *Auditor) Observe(old, cur *ledger.Record) *Conflict {
	return a.observe(Detect(old, cur))
}

// ObserveWrittenBack is Observe for a change whose old image the caller
// wrote back over the new one (a completed record over the other region's
// claim without an outcome): the replicas keep the old image, so the
// event names it the winner and the new image, written over, the loser.
func (a *Auditor) ObserveWrittenBack(old, cur *ledger.Record) *Conflict {
	c := Detect(old, cur)
	if c != nil {
		c.Winner, c.Loser = c.Loser, c.Winner
	}
	return a.observe(c)
}

func (a *Auditor) observe(c *Conflict) *Conflict {
	if c == nil {
		return nil
	}
	c.Strategy, c.Region = a.cfg.Strategy, a.cfg.Region
	c.Effect = a.cfg.EffectRef(c.Effect)
	c.Winner.Owner, c.Loser.Owner = a.hash.Log(c.Winner.Owner), a.hash.Log(c.Loser.Owner)
	dims := map[string]string{"strategy": string(c.Strategy), "kind": c.Kind}
	if a.cfg.Region != "" {
		dims["region"] = a.cfg.Region
	}
	a.cfg.Metrics.Count(MetricConflicts, 1, dims)
	a.cfg.Metrics.Count(MetricConflictsAll, 1, nil)
	a.cfg.Log.Warn("cross_region_conflict",
		slog.String("strategy", string(c.Strategy)), slog.String("region", c.Region),
		slog.String("kind", c.Kind), slog.String("effect", c.Effect), slog.String("reason", c.Reason),
		slog.Any("winner", c.Winner), slog.Any("loser", c.Loser))
	return c
}
