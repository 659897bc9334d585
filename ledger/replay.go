package ledger

import (
	"context"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
)

// ReplaySourceMissingError is ErrReplaySourceMissing with the effect id of
// the source execution that has no recorded outcome.
type ReplaySourceMissingError struct {
	// EffectID is the source execution's effect id.
	EffectID string
	// State is the source record's state ("" when there is no record).
	State State
}

func (e *ReplaySourceMissingError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("ledger: replay source missing: effect %s has no record", e.EffectID)
	}
	return fmt.Sprintf("ledger: replay source missing: effect %s is %s, with no recorded outcome", e.EffectID, e.State)
}

// Is makes errors.Is(err, ErrReplaySourceMissing) true.
func (e *ReplaySourceMissingError) Is(target error) bool { return target == ErrReplaySourceMissing }

// Replay resolves one execution of a side-effecting node of a replay fork
// from the SOURCE run's record, and never performs the effect: source is
// the identity the source run's execution had (for the activity recipe:
// the source's runId, the node and the execution's ordinal, under the
// source's recipe stamps), so the outcome is keyed on (sourceRunId, nodeId,
// n), never on the fork's own runId.
//
// Guarantees: Replay calls no effect function and writes nothing (one
// consistent read of the record): a replay fork adds no attempt to any
// witness, its own or the source's. A recorded success comes back as
// Result{Replayed: true, Value}; a recorded failure as *FailedError (with
// Replayed), exactly as Do answers a duplicate; a source with no terminal
// outcome (no record, past its retention, or claimed, firing, escaped or
// released) is *ReplaySourceMissingError: the caller fails closed and never
// substitutes a synthesized or empty success.
func (l *Ledger) Replay(ctx context.Context, source identity.Identity) (Result, error) {
	if err := source.Validate(); err != nil {
		return Result{}, err
	}
	rec, err := l.Lookup(ctx, source.EffectID)
	if err != nil {
		return Result{}, err
	}
	if rec == nil {
		return Result{}, &ReplaySourceMissingError{EffectID: source.EffectID}
	}
	if rec.State != StateCompleted || rec.Outcome == nil {
		return Result{}, &ReplaySourceMissingError{EffectID: source.EffectID, State: rec.State}
	}
	return replay(rec)
}
