package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Operator tooling: list, show and resolve escaped effects (the library
// calls behind `idemkit effects`).

// EffectState is the state of an effect as a whole, as operators see it.
type EffectState string

const (
	// EffectCompleted: a success is recorded.
	EffectCompleted EffectState = "completed"
	// EffectFailed: a failure is recorded.
	EffectFailed EffectState = "failed"
	// EffectInFlight: an attempt holds a live claim.
	EffectInFlight EffectState = "in-flight"
	// EffectEscaped: no outcome, and the last attempt that fired may have
	// reached the provider without anyone recording what happened (it
	// escaped, or its executor's lease ran out after the fire mark). The
	// next attempt (scheduled, or left to an operator once the retries are
	// exhausted) reuses the provider key.
	EffectEscaped EffectState = "escaped"
	// EffectPending: no outcome, nothing escaped (released attempts only).
	EffectPending EffectState = "pending"
)

// EffectView is an operator's view of one effect record.
type EffectView struct {
	EffectID, ProviderKey, RunID string
	Keying                       identity.Keying
	State                        EffectState
	// Attempt is the number of attempts made, MaxAttempts the cap.
	Attempt, MaxAttempts int
	// NextAttemptAt is when the next attempt is due (zero: not scheduled);
	// Deadline the end of the time budget (zero: none).
	NextAttemptAt, Deadline time.Time
	// Exhausted is true when no further attempt will start on its own (the
	// attempt cap or the time budget is spent): an operator must resolve an
	// escaped effect in that state.
	Exhausted bool
	// Outcome is the recorded outcome (nil without one).
	Outcome *Outcome
	// Attempts lists every attempt, oldest first.
	Attempts []Attempt
	// Rev identifies this version of the record: Resolve refuses a
	// resolution whose Rev no longer matches (the effect changed since it
	// was shown, or it was shown in flight and its attempt's lease has run
	// out since).
	Rev string
	// UpdatedAt is the record's last write.
	UpdatedAt time.Time
}

// View returns the operator's view of r at now.
func (l *Ledger) View(r *Record, now time.Time) EffectView {
	v := EffectView{EffectID: r.EffectID, ProviderKey: r.ProviderKey, RunID: r.RunID, Keying: r.Keying,
		Attempt: r.Attempt, MaxAttempts: l.attemptCap(r), Deadline: r.Deadline, Outcome: r.Outcome,
		Attempts: append([]Attempt(nil), r.Attempts...), Rev: rev(r, now), UpdatedAt: r.UpdatedAt}
	switch {
	case r.State == StateCompleted && r.Outcome != nil && r.Outcome.OK:
		v.State = EffectCompleted
	case r.State == StateCompleted:
		v.State = EffectFailed
	case (r.State == StateClaimed || r.State == StateFiring) && now.Before(r.LeaseUntil):
		v.State = EffectInFlight
	case r.State == StateFiring:
		v.State = EffectEscaped // lease ran out after the fire mark
		if a := &v.Attempts[len(v.Attempts)-1]; a.State == AttemptClaimed {
			// It became escaped when its executor's lease ran out.
			a.State, a.At = AttemptEscaped, r.LeaseUntil
		}
	default:
		// Escaped while an attempt whose delivery is unknown was not
		// settled since: attempts after it that never reached the
		// provider (NotSent) do not settle it; an operator's resolution
		// (its own row) does.
		v.State = EffectPending
		for i := len(r.Attempts) - 1; i >= 0; i-- {
			a := r.Attempts[i]
			if a.Operator != "" {
				if a.State == AttemptEscaped {
					v.State = EffectEscaped
				}
				break
			}
			if a.State == AttemptEscaped {
				// Fired, or (never fired) refused by the fence's pass
				// of an escaped attempt whose record lapsed (see Do).
				v.State = EffectEscaped
				break
			}
		}
	}
	if v.State == EffectEscaped || v.State == EffectPending {
		v.Exhausted = r.Attempt >= v.MaxAttempts || pastBudget(r, now)
		if r.State == StateReleased && !v.Exhausted {
			v.NextAttemptAt = r.NotBefore
		}
	}
	return v
}

// rev is a short digest of what a resolution is fenced on: the owner
// token, attempt, state, lease and last write, and whether an attempt held
// a live claim at now. A record whose attempt was in flight when it was
// shown has another rev once that attempt's lease has run out, although
// nothing was written since: an operator who decided on the in-flight
// view (and checked the provider before a slow send reached it) must look
// again at an attempt that has stopped before settling it.
func rev(r *Record, now time.Time) string {
	parts := []string{r.Owner, strconv.Itoa(r.Attempt), string(r.State),
		strconv.FormatInt(r.LeaseUntil.UnixMilli(), 10), strconv.FormatInt(r.UpdatedAt.UnixMilli(), 10),
		strconv.Itoa(len(r.Attempts))}
	if (r.State == StateClaimed || r.State == StateFiring) && now.Before(r.LeaseUntil) {
		parts = append(parts, "in-flight")
	}
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

// Scanner is implemented by stores that can list every record (an operator's
// whole-table listing, e.g. a DynamoDB Scan). Optional: without it,
// ListEffects needs a run.
type Scanner interface {
	// Scan calls fn for every effect and slot record (past retention
	// included); fn returning false stops the scan.
	Scan(ctx context.Context, fn func(*Record) bool) error
}

// Filter selects effects for ListEffects.
type Filter struct {
	// State keeps effects in this state ("" : any).
	State EffectState
	// RunID keeps the effects of one run (its witness index); "" lists
	// the whole store (Scanner required).
	RunID string
	// Limit stops after this many effects (0: no limit).
	Limit int
}

// ListEffects returns the views of the effects f selects, oldest write
// first. Records past their retention and host slots are left out.
func (l *Ledger) ListEffects(ctx context.Context, f Filter) ([]EffectView, error) {
	now := l.now()
	var out []EffectView
	keep := func(r *Record) bool {
		if r.Kind != identity.KindEffect || !r.Live(now) {
			return true
		}
		if f.RunID != "" && !l.cfg.WitnessDuplicates && r.RunID != f.RunID && needsRunRef(r, f.RunID) {
			// A later effect under an identity the run took part in (see
			// Witness), not one of the run's.
			return true
		}
		v := l.View(r, now)
		if f.State == "" || v.State == f.State {
			out = append(out, v)
		}
		return f.RunID != "" || f.Limit <= 0 || len(out) < f.Limit
	}
	if f.RunID != "" {
		recs, err := l.cfg.Store.ListByRun(ctx, f.RunID)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			keep(r)
		}
	} else {
		sc, ok := l.cfg.Store.(Scanner)
		if !ok {
			return nil, ErrNoScan
		}
		if err := sc.Scan(ctx, keep); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].UpdatedAt.Before(out[j].UpdatedAt) })
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// maxRecordAttempts bounds the attempts (rows) of an effect record: the
// executor's own, at most MaxMaxAttempts, and the rows of 50 not-delivered
// resolutions, each its operator row and the attempt it grants. On
// DynamoDB's layout that is under 50 KB with 64-byte run, node and
// invocation ids and every resolution's longest operator and note, well
// within the 400 KB item (a large value is kept beside the record). A
// not-delivered resolution that would take a record past it is refused
// (Resolve).
const maxRecordAttempts = MaxMaxAttempts + 100

// grantable reports whether a not-delivered resolution may grant cur one
// more attempt although nothing of it escaped: it is pending with its
// attempts exhausted (every attempt since the last settlement, or since
// the first, ended without reaching the provider: its function said it
// was not sent, or it never passed its point of no return, e.g. its
// fencing token could not be had or its invocation ended right after the
// claim; which makes "not delivered" true by construction), so without it
// the effect could never move again while it is kept.
func grantable(v EffectView) bool {
	return v.State == EffectPending && v.Exhausted
}

// ShowEffect returns the view of effectID, or ErrEffectNotFound.
func (l *Ledger) ShowEffect(ctx context.Context, effectID string) (EffectView, error) {
	r, err := l.Lookup(ctx, effectID)
	if err != nil {
		return EffectView{}, err
	}
	if r == nil || r.Kind != identity.KindEffect {
		return EffectView{}, ErrEffectNotFound
	}
	return l.View(r, l.now()), nil
}

// Settlement is what an operator found out about an escaped effect.
type Settlement string

const (
	// Delivered: the provider performed the effect. The effect is completed
	// as a success (with no value), and every later Do replays it.
	Delivered Settlement = "delivered"
	// NotDelivered: the provider did not perform it. The effect is released
	// for exactly one more attempt, due at once, with the same provider key
	// (and no time budget left to stop it).
	NotDelivered Settlement = "not-delivered"
)

// Resolution is an operator's settlement of an escaped effect.
type Resolution struct {
	// As is the settlement. Required.
	As Settlement
	// Operator identifies who resolves (recorded on the resolution row).
	// Required, at most 128 bytes of printable UTF-8 with at least one
	// visible character (white space alone names no one).
	Operator string
	// Note is an optional free-text note, at most 512 bytes of UTF-8
	// (printable, and line breaks).
	Note string
	// Rev is the EffectView.Rev the operator decided on. Required: the
	// resolution is refused with ErrChanged if the effect changed since.
	Rev string
}

func (r Resolution) validate() error {
	if r.As != Delivered && r.As != NotDelivered {
		return fmt.Errorf("ledger: resolution must be %q or %q", Delivered, NotDelivered)
	}
	if r.Operator == "" || len(r.Operator) > 128 || strings.ContainsFunc(r.Operator, isControl) || !utf8.ValidString(r.Operator) || !namesSomeone(r.Operator) {
		return errors.New("ledger: resolution needs an operator identity (1..128 bytes of printable UTF-8, not white space only)")
	}
	if len(r.Note) > 512 {
		return errors.New("ledger: resolution note is limited to 512 bytes")
	}
	if !utf8.ValidString(r.Note) {
		return errors.New("ledger: resolution note is not UTF-8")
	}
	if strings.ContainsFunc(r.Note, func(c rune) bool { return c != '\n' && isControl(c) }) {
		return errors.New("ledger: resolution note holds a control character (only printable text and line breaks)")
	}
	if r.Rev == "" {
		return errors.New("ledger: resolution needs the Rev of the effect as shown")
	}
	return nil
}

// isControl reports a control character: C0 (below U+0020), DEL, or C1
// (U+0080..U+009F, U+009B being a terminal's CSI as ESC [ is).
func isControl(c rune) bool { return c < 0x20 || c >= 0x7f && c < 0xa0 }

// namesSomeone reports whether an operator identity has a visible
// character (a letter, digit, punctuation or symbol): one of white space
// and invisible format characters only names no one.
func namesSomeone(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool { return unicode.In(c, unicode.L, unicode.N, unicode.P, unicode.S) })
}

// Resolve settles an escaped effect for an operator, fenced: it is refused
// with ErrChanged if the record's Rev differs from res.Rev (the effect
// changed since it was shown, or was shown in flight and its attempt has
// stopped since: a decision on a live attempt does not settle it), with ErrNotEscaped if the effect is not
// escaped (in flight, completed, never fired) — except that NotDelivered
// also grants one more attempt to a pending effect whose attempts are
// exhausted (none since the last settlement, or since the first, reached
// the provider: e.g. the one a not-delivered resolution granted ended
// NotSent, or every attempt ended before its point of no return, its
// fencing token out of reach) — and the write itself is
// conditional on the record read (owner token, attempt, state, and an
// expired lease for a stalled attempt), so a concurrent executor never
// loses its claim to it. The settlement is recorded as an attempt row of
// its own carrying the operator and note, with no fire time (nothing is
// sent), and shows in the witness: "completed" for Delivered,
// "released" for NotDelivered. A stalled attempt (lease expired after the
// fire mark) is closed as escaped first, in the same write; a stalled claim
// that never reached its fire mark, as released. A fenced
// effect (its attempts took fencing tokens) is settled only by a Ledger
// with a Fencer (else ErrResolveNeedsFence, nothing written): under
// fenced-effects its record is decided in the fence's (home) region, and a
// ledger without the fence cannot tell that region's table from a replica.
// As NotDelivered it is settled only through a ReopeningFencer, which
// first forgets its escaped attempt's pass (else ErrResolveNeedsFence,
// nothing written): the next attempt is then fenced like any other, and
// fires once. A reopen the fence refuses (another token passed) is its
// error (ErrPassHeld), nothing written; one that fails otherwise matches
// ErrFenceReopenUnknown, nothing recorded. A not-delivered resolution grants
// its attempt whatever the effect's attempt cap, up to a bound on the rows
// one record keeps (the executor's MaxMaxAttempts and those of 50
// resolutions); past it, it is refused with an error matching
// ErrAttemptsExhausted that says so, nothing written, and only a delivered
// resolution settles the effect.
func (l *Ledger) Resolve(ctx context.Context, effectID string, res Resolution) (EffectView, error) {
	if err := res.validate(); err != nil {
		return EffectView{}, err
	}
	cur, err := l.Lookup(ctx, effectID)
	if err != nil {
		return EffectView{}, err
	}
	if cur == nil || cur.Kind != identity.KindEffect {
		return EffectView{}, ErrEffectNotFound
	}
	now := l.now()
	if rev(cur, now) != res.Rev {
		return l.View(cur, now), ErrChanged
	}
	if v := l.View(cur, now); v.State != EffectEscaped && !(res.As == NotDelivered && grantable(v)) {
		return v, fmt.Errorf("%w (it is %s)", ErrNotEscaped, v.State)
	}
	if res.As == NotDelivered && cur.Attempt+2 > maxRecordAttempts {
		// The resolution's row and the attempt it grants would take the
		// record past the attempts it keeps: refused before the fence is
		// reopened, nothing written.
		return l.View(cur, now), fmt.Errorf("%w: effect %s holds %d attempts, and its record keeps at most %d: "+
			"a not-delivered resolution cannot grant another; resolve it as delivered once the effect is performed by hand, "+
			"or it is tried afresh once its record passes its retention", ErrAttemptsExhausted, cur.EffectID, cur.Attempt, maxRecordAttempts)
	}
	if cur.Fence > 0 && l.cfg.Fencer == nil {
		// A fenced effect, settled by a ledger without the deployment's
		// fence: under fenced-effects its record is decided where the
		// fence is (the home region), and this ledger may be reaching a
		// replica whose write would replicate over the home record, last
		// writer winning. Refused, whichever the settlement.
		return l.View(cur, now), ErrResolveNeedsFence
	}
	if res.As == NotDelivered && cur.Fence > 0 {
		// A fenced effect: the fence may hold the escaped attempt's pass
		// and would refuse the next attempt. Reopened first, so that no
		// resolution is written whose attempt the fence refuses.
		rf, ok := l.cfg.Fencer.(ReopeningFencer)
		if !ok {
			return l.View(cur, now), ErrResolveNeedsFence
		}
		if err := rf.Reopen(ctx, cur.EffectID, cur.Fence); err != nil {
			if errors.Is(err, ErrPassHeld) {
				return l.View(cur, now), fmt.Errorf("ledger: reopen the fence of %s: %w", cur.EffectID, err)
			}
			// Not a refusal: the reopen may have been applied with its
			// answer lost. Nothing is recorded, and resolving again is
			// safe either way: a reopen of a token that no longer holds
			// the pass succeeds.
			return l.View(cur, now), fmt.Errorf("%w (reopening the fence of %s); resolve again to record it: %w", ErrFenceReopenUnknown, cur.EffectID, err)
		}
	}
	next := cur.Clone()
	if a := next.last(); a != nil {
		switch cur.State {
		case StateFiring:
			// Escaped when its executor's lease ran out.
			a.State, a.At = AttemptEscaped, cur.LeaseUntil
		case StateClaimed:
			// A claim whose executor stopped before its fire mark (under a
			// Fencer, the claim is not its fire mark): released, never
			// fired, when its lease ran out, as a reclaim closes it.
			a.State, a.At = AttemptReleased, cur.LeaseUntil
		}
	}
	row := Attempt{N: cur.Attempt + 1, At: now, Operator: res.Operator, Note: res.Note}
	if a := next.last(); a != nil {
		row.RunID, row.NodeID = a.RunID, a.NodeID
	}
	next.Attempt = row.N
	switch res.As {
	case Delivered:
		row.State = AttemptCompleted
		next.State = StateCompleted
		next.Outcome = &Outcome{OK: true}
	case NotDelivered:
		row.State = AttemptReleased
		next.State = StateReleased
		next.NotBefore = time.Time{}
		next.Deadline = time.Time{}
		next.MaxAttempts = row.N + 1 // within maxRecordAttempts (checked above)
	}
	next.Attempts = append(next.Attempts, row)
	next.Owner = newToken()
	next.UpdatedAt = now
	next.ExpiresAt = l.extend(next.ExpiresAt, now)
	want := Expect{Owner: cur.Owner, Attempt: cur.Attempt, State: cur.State, LeaseExpired: cur.State != StateReleased}
	ok, c, err := l.cfg.Store.Replace(ctx, next, want, now)
	reopened := res.As == NotDelivered && cur.Fence > 0
	if err != nil {
		if reopened {
			err = errors.Join(err, ErrFenceReopened)
		}
		return EffectView{}, err
	}
	if !ok {
		err = ErrChanged
		if reopened {
			err = errors.Join(ErrChanged, ErrFenceReopened)
		}
		if c == nil {
			return EffectView{}, err
		}
		return l.View(c, now), err
	}
	return l.View(next, now), nil
}
