package ledger

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
)

// SlotResult says what FireOnce did.
type SlotResult struct {
	// Fired is true when this call won the slot and ran the work.
	Fired bool
	// State is the slot record's state: claimed (fired, no outcome recorded
	// yet, or the firer crashed) or completed.
	State State
	// OK is true when a completed slot's work succeeded.
	OK bool
	// Error is the recorded failure message of a completed slot.
	Error string
}

// FireOnce runs fn at most once for slot, ever (within retention):
// an insert-if-absent claim, then the outcome, fenced on the owner token
// (2 round trips). Unlike Layer 1 and unlike Do, a slot is NEVER released:
// not on failure (a failed fn is recorded as failed), not on a crash, not on
// lease expiry, because releasing it would let another instance re-fire work
// the first may have half-performed. A claim whose write failed is read
// back: found carrying this call's owner token (it landed, its answers
// lost), it is this call's, and fn runs. A losing call is a value (Fired
// false), not an error. fn's error is returned to the caller that ran it.
func (l *Ledger) FireOnce(ctx context.Context, slot identity.Slot, fn func(ctx context.Context) error) (SlotResult, error) {
	key, err := slot.Key()
	if err != nil {
		return SlotResult{}, err
	}
	if fn == nil {
		return SlotResult{}, errors.New("ledger: nil slot function")
	}
	st := l.cfg.Store
	now := l.now()
	rec := &Record{
		Key: key, Kind: identity.KindSlot, State: StateClaimed, Owner: newToken(), Attempt: 1,
		LeaseUntil: now.Add(l.cfg.Lease),
		Attempts:   []Attempt{{N: 1, State: AttemptClaimed, At: now, Fired: true}},
		CreatedAt:  now, UpdatedAt: now, ExpiresAt: now.Add(l.cfg.Retention),
	}
	won, cur, err := st.Create(ctx, rec, now)
	if err != nil {
		// The claim may have landed with every answer to it lost (the
		// store's own retries gave up). Left so, the slot would stay
		// claimed by no one for its whole retention, its work never run
		// (RED_TEAM 425): a slot carrying this call's owner token is this
		// call's claim, which nothing else can hold (a slot is never
		// reclaimed), so it is won and the work runs. One read, on this
		// path only; when it fails too, the slot is left as after a crash.
		if mine, gerr := st.Get(ctx, key); gerr != nil || mine == nil || mine.Owner != rec.Owner || mine.State != StateClaimed {
			return SlotResult{}, l.storeChecked(ctx, err)
		}
		won = true
	}
	if !won {
		if cur == nil {
			if cur, err = st.Get(ctx, key); err != nil {
				return SlotResult{}, l.storeChecked(ctx, err)
			}
		}
		if cur == nil {
			return SlotResult{}, fmt.Errorf("ledger: slot %s lost but unreadable", key)
		}
		if cur.Kind != identity.KindSlot {
			return SlotResult{}, &MismatchError{Field: "kind"}
		}
		l.count(MetricSuppressions, identity.KindSlot, "")
		r := SlotResult{State: cur.State}
		if cur.Outcome != nil {
			r.OK, r.Error = cur.Outcome.OK, cur.Outcome.Error
		}
		return r, nil
	}
	ferr := fn(ctx)
	now = l.now()
	done := rec.Clone()
	done.State, done.UpdatedAt = StateCompleted, now
	done.Attempts[0].State, done.Attempts[0].At = AttemptCompleted, now
	done.Outcome = &Outcome{OK: ferr == nil}
	if ferr != nil {
		done.Outcome.Error = cutMessage(ferr.Error())
	}
	res := SlotResult{Fired: true, State: StateCompleted, OK: ferr == nil, Error: done.Outcome.Error}
	wctx := l.detached(ctx)
	ok, _, err := st.Replace(wctx, done, Expect{Owner: rec.Owner, Attempt: 1, State: StateClaimed}, now)
	wctx.release()
	if err != nil {
		res.State = StateClaimed
		return res, errors.Join(fmt.Errorf("ledger: recording slot outcome: %w", err), ferr)
	}
	if !ok {
		res.State = StateClaimed
		return res, errors.Join(ErrLeaseLost, ferr)
	}
	return res, ferr
}
