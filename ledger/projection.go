package ledger

import (
	"context"
	"github.com/idemkit/idemkit/ledger/identity"
	"sort"
	"time"
)

// Projection is the witness served at GET /runs/{runId}/effects
// (effect-ledger-projection.schema.json): one row per attempt.
type Projection struct {
	RunID   string       `json:"runId"`
	Effects []WitnessRow `json:"effects"`
}

// WitnessRow is one attempt at one effect. It carries no provider payload and
// no credential: ProviderKey is the derived idempotency key (see
// Identity.ProviderKey in ledger/identity), exactly what the provider received as
// Idempotency-Key.
type WitnessRow struct {
	EffectID     string          `json:"effectId"`
	NodeID       string          `json:"nodeId"`
	Attempt      int             `json:"attempt"`
	InvocationID string          `json:"invocationId,omitempty"`
	Keying       identity.Keying `json:"keying"`
	ProviderKey  string          `json:"providerKey,omitempty"`
	State        AttemptState    `json:"state"`
	// At is the attempt's time: when it fired for an escaped attempt (the
	// moment the request may have reached the provider, never when the
	// attempt was found stalled), when it ended for a completed or released
	// one, and when it was claimed (or fired) for one still running.
	At string `json:"at"`

	// Fields below are for library callers and idemkit's own views; the
	// OpenWOP projection document (closed schema) does not carry them.

	// Fired is true when the attempt passed the fire mark, and FiredAt is
	// when: every request that may have reached the provider is a row with
	// Fired set.
	Fired   bool      `json:"-"`
	FiredAt time.Time `json:"-"`
	// EndedAt is when the attempt ended (zero while it is running).
	EndedAt time.Time `json:"-"`
	// MaxAttempts is the effect's attempt cap: this row is attempt
	// Attempt of MaxAttempts.
	MaxAttempts int `json:"-"`
	// NextAttemptAt is set on the effect's last row while its next attempt
	// is scheduled (Record.NotBefore), and Deadline is the end of its time
	// budget (zero: none).
	NextAttemptAt, Deadline time.Time `json:"-"`
	// Operator and Note are set on an operator's resolution row.
	Operator, Note string `json:"-"`
}

// outsideRunNode is the nodeId of a witness row for an attempt made outside
// any run (an effect reached through another entry point, e.g. an API call
// under a business identity) when no attempt at the effect was made by a
// node: the projection requires a nodeId in the nodeId grammar on every
// row, and none was recorded.
const outsideRunNode = "outside-run"

// recordNode is the nodeId a witness row of r shows for an attempt that
// carries none (made outside any run, or an operator's resolution): the
// node of r's first attempt that has one, else outsideRunNode.
func recordNode(r *Record) string {
	for _, a := range r.Attempts {
		if a.NodeID != "" {
			return a.NodeID
		}
	}
	return outsideRunNode
}

// rowTime is the time a witness row shows for attempt a (see WitnessRow.At).
func rowTime(a Attempt) time.Time {
	if a.Fired && (a.State == AttemptEscaped || a.State == AttemptClaimed) && !a.FiredAt.IsZero() {
		return a.FiredAt
	}
	return a.At
}

// Witness returns the projection of runID: one row per attempt of every
// effect record the run took part in. A run takes part in a record when it
// created it, when it made an attempt at it (Do writes a run reference before
// such an attempt), or, with Config.WitnessDuplicates, when one of its Do
// calls was suppressed by it. Each such record contributes ALL its attempts,
// whichever run or entry point made them: an effect reached by two runs
// through one business identity shows the same rows (the same effectId,
// providerKey, attempts and states) in both witnesses, and a suppressed
// duplicate adds no row, because it fired nothing. Records past retention are
// left out. The store's run index may be eventually consistent. Every row
// has a nodeId in the OpenWOP nodeId grammar: its attempt's node, or, for an
// attempt made outside any run (another entry point reaching a business
// identity) and for an operator's resolution, the node of the effect's first
// attempt that has one, else "outside-run".
//
// Without Config.WitnessDuplicates, a run whose only contact with an effect
// was a suppressed duplicate does not list it (recording that contact would
// cost the duplicate a second round trip); the suppression is counted in
// MetricSuppressions.
func (l *Ledger) Witness(ctx context.Context, runID string) (Projection, error) {
	recs, err := l.cfg.Store.ListByRun(ctx, runID)
	if err != nil {
		return Projection{}, err
	}
	now := l.now()
	live := recs[:0:0]
	for _, r := range recs {
		if !r.Live(now) {
			continue
		}
		if r.State == StateFiring && !now.Before(r.LeaseUntil) {
			// Past the fire mark, and its executor's lease ran out: the
			// effect may have reached the provider and no one is recording
			// its outcome. That is escaped (until a reclaim resolves it),
			// never "claimed" — e.g. a run given up while its effect was in
			// flight is never re-executed.
			r = r.Clone()
			if a := r.last(); a != nil && a.State == AttemptClaimed {
				a.State = AttemptEscaped
			}
		}
		live = append(live, r)
	}
	// Without WitnessDuplicates a run takes part only in records it created
	// or made an attempt at: any other record its references reach is a
	// later effect under the same identity, re-created after the record the
	// run took part in passed its retention (a reference can outlive it).
	return project(runID, live, !l.cfg.WitnessDuplicates, l.cfg.MaxAttempts), nil
}

// project builds the projection of runID from records (pure; rows ordered by
// time, then effectId, then attempt): every attempt of each effect record
// that runID created or made an attempt at. Host slots and other records are
// skipped (Witness, which lists exactly the records the run references, also
// keeps records reached by a suppressed duplicate under
// Config.WitnessDuplicates). The recorded effectId and
// keying are used as is: a reader never recomputes an identity. With
// filter false every record is projected; capDefault is the attempt cap of a
// record that states none.
func project(runID string, recs []*Record, filter bool, capDefault int) Projection {
	p := Projection{RunID: runID, Effects: []WitnessRow{}}
	type row struct {
		at time.Time
		w  WitnessRow
	}
	var rows []row
	for _, r := range recs {
		if r.Kind != identity.KindEffect || filter && r.RunID != runID && needsRunRef(r, runID) {
			continue
		}
		capN := r.MaxAttempts
		if capN == 0 {
			capN = capDefault
		}
		recNode := recordNode(r)
		for i, a := range r.Attempts {
			node := a.NodeID
			if node == "" {
				node = recNode
			}
			at := rowTime(a)
			w := WitnessRow{
				EffectID: r.EffectID, NodeID: node, Attempt: a.N, InvocationID: a.InvocationID,
				Keying: r.Keying, ProviderKey: r.ProviderKey, State: a.State,
				At: at.UTC().Format(time.RFC3339Nano), Fired: a.Fired, FiredAt: a.FiredAt,
				MaxAttempts: capN, Deadline: r.Deadline, Operator: a.Operator, Note: a.Note,
			}
			if i == len(r.Attempts)-1 && r.State == StateReleased && !pastBudget(r, time.Time{}) {
				w.NextAttemptAt = r.NotBefore
			}
			if a.State != AttemptClaimed {
				w.EndedAt = a.At
			}
			rows = append(rows, row{at, w})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		if a.w.EffectID != b.w.EffectID {
			return a.w.EffectID < b.w.EffectID
		}
		return a.w.Attempt < b.w.Attempt
	})
	for _, r := range rows {
		p.Effects = append(p.Effects, r.w)
	}
	return p
}
