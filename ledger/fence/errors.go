package fence

import (
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

var (
	// ErrStale: the token was not the newest one for the effect, or another
	// token had already passed the point of no return. The effect was not
	// fired. It also matches ledger.ErrStaleFence.
	ErrStale = fmt.Errorf("fence: stale fencing token: %w", ledger.ErrStaleFence)
	// ErrIssued is matched by *IssuedError.
	ErrIssued = errors.New("fence: effect already passed its point of no return")
	// ErrNotKept: the fence could not keep an effect's item as long as
	// asked, because the item is absent, past its retention or another
	// token's (Owner.Keep).
	ErrNotKept = errors.New("fence: the effect's fence item is not this token's or has ended")
	// ErrUnfenced: Guard was called without a fencing token (the Ledger has
	// no Fencer configured); the effect was not fired.
	ErrUnfenced = errors.New("fence: effect function called without a fencing token")
)

// IssuedError says that a token already passed the effect's point of no
// return (in this region or another), so no new token is issued and this
// attempt must not fire. The effect's outcome, if recorded, reaches this
// region's ledger by replication; until then the attempt cannot tell whether
// the provider was reached.
type IssuedError struct {
	// Token is the token that passed.
	Token uint64
	// Region is where it passed ("" if unknown).
	Region string
	// At is when it passed.
	At time.Time
}

func (e *IssuedError) Error() string {
	return fmt.Sprintf("fence: effect already passed its point of no return (token %d, region %q, at %s)",
		e.Token, e.Region, e.At.UTC().Format(time.RFC3339Nano))
}

// Is matches ErrIssued, and ledger.ErrPassHeld when it names the token
// that passed: Owner.Token's refusal keeps that pass Config.Retention from
// then, at least the ledger's retention, so the ledger keeps the effect
// record as long. A refusal that found no pass when it looked (a race with
// its end) names none and keeps nothing.
func (e *IssuedError) Is(target error) bool {
	return target == ErrIssued || (target == ledger.ErrPassHeld && e.Token != 0)
}

// heldPass is Owner.Token's refusal: the *IssuedError (errors.As finds it
// by Unwrap; Error and Is are its own), which also tells the ledger the
// token that passed and when (HeldPass). The ledger records a pass older
// than its retention on the refused claim's record, so that an escaped
// attempt whose record lapsed is shown escaped and can be resolved.
type heldPass struct{ *IssuedError }

func (h heldPass) Unwrap() error                 { return h.IssuedError }
func (h heldPass) HeldPass() (uint64, time.Time) { return h.Token, h.At }
