package ledger

import (
	"context"
	"time"
)

// Store persists ledger records. It is owned by this package and kept small:
// every operation reads or writes ONE record, and every write is a single
// conditional write (no transactions), so a DynamoDB global table can hold it.
// Implementations: ledger/memstore, ledger/dynamostore; both are proven by
// ledgertest.Run. Implementations must be safe for concurrent use.
//
// Conditions use the caller's now; a record whose ExpiresAt is not after now
// is treated as absent (retention is inside every condition, because TTL
// deletion is lazy).
type Store interface {
	// Create inserts rec if no live record exists under rec.Key (absent, or
	// ExpiresAt <= now, which it then replaces). won is false when a live
	// record exists; current is then that record, or nil when the store
	// could not read it back (the caller re-reads with Get). A losing claim
	// is a value, not an error.
	Create(ctx context.Context, rec *Record, now time.Time) (won bool, current *Record, err error)

	// Replace writes next in place of the record under next.Key if, and only
	// if, the stored record is live at now and matches want (see Expect),
	// and, when next.Fence > 0, its stored Fence is absent or <= next.Fence.
	// On a failed condition ok is false and current is the stored record (nil
	// if absent or unreadable).
	Replace(ctx context.Context, next *Record, want Expect, now time.Time) (ok bool, current *Record, err error)

	// Get returns the record under key (strongly consistent), or nil if there
	// is none. It returns records past their retention too; callers check.
	Get(ctx context.Context, key string) (*Record, error)

	// ListByRun returns the effect records of runID (the witness index):
	// those whose RunID is runID (the run created them) and those runID
	// references (AddRunRef), each once. A reference lists a record that
	// holds an attempt of runID, or that was created before the
	// reference's expiresAt: a record created after it is a later effect
	// under the same identity, re-created once the one the reference was
	// written for passed its retention, and is left out however late TTL
	// deletes the reference. It may be eventually consistent (a
	// DynamoDB GSI), and may return records past their retention (callers
	// check).
	ListByRun(ctx context.Context, runID string) ([]*Record, error)

	// AddRunRef records that runID took part in the effect record under key
	// although another run created it, so that ListByRun(runID) lists the
	// record. It is an idempotent, unconditional upsert of a small item of
	// its own (never a write to the record, never a transaction), retained
	// until expiresAt (TTL).
	AddRunRef(ctx context.Context, key, runID string, expiresAt time.Time) error
}

// Expect is the fencing condition of Store.Replace: the stored record must
// have exactly this owner token, attempt number and state.
//
// Extension point for fencing (ledger/fence): Replace also enforces the
// monotonic Record.Fence condition, and Ledger puts the token from
// Config.Fencer on the fire-mark write, the point of no return (with a
// Fencer the fire mark is a write of its own, after the claim).
type Expect struct {
	// Owner is the owner token the stored record must carry.
	Owner string
	// Attempt is the attempt number the stored record must carry.
	Attempt int
	// State is the state the stored record must be in.
	State State
	// LeaseExpired additionally requires the stored LeaseUntil <= now (an
	// atomic reclaim of a stalled owner).
	LeaseExpired bool
}

// Fencer supplies fencing tokens from a linearizable owner (e.g. a home-region
// fence table). Optional: when Config.Fencer is set, Do asks it for a token
// just before the fire mark, and the fire-mark write is conditional on the
// record's stored token being <= the new one; a stale token means the
// effect is not fired and Do returns ErrStaleFence. A Fencer keeps the fire
// mark a write of its own (claim, fire mark, outcome: one more round trip
// than without a Fencer, whose claim is its fire mark).
type Fencer interface {
	// Token returns a token for effectID, strictly greater than every token
	// issued before for it. An error aborts the attempt before the fire:
	// the attempt is given back released, and unless the error matches
	// ErrPassHeld or ErrStaleFence (or Do's context ended) its next
	// attempt is scheduled as after a call that did not leave (NotSent):
	// on Effect.Retry's backoff, Do returning *RetryLaterError (or
	// *AttemptsExhaustedError at the cap) that carries the error.
	Token(ctx context.Context, effectID string) (uint64, error)
}

// RetainingFencer is a Fencer that keeps what it issued for a bounded time
// after its last use (fence.Owner: its Config.Retention), and can keep it
// longer. Past that time a token that passed the point of no return is
// forgotten and the effect can be fenced, and fired, again; so New refuses
// a Config whose Retention (how long an effect record, escaped attempts
// included, is kept) is longer than FenceRetention, and Do keeps no record
// of a fenced effect longer than the fence keeps the item of its token:
// a token's issue keeps the item FenceRetention from then, while an
// attempt holding it may end escaped (ErrUncertain) long after, its record
// written to be kept Retention from its outcome. Before such a write (or a
// heartbeat renewal) would keep the record past what the fence is known to
// keep, Do asks Keep to keep the item at least until the record's new
// retention end (one conditional write, on that path only); when Keep
// fails, the record is kept only as long as the fence is known to keep
// the item (an escaped outcome), or the renewal fails (see
// Config.Heartbeat). The fence's clock is taken to agree with the
// Ledger's.
type RetainingFencer interface {
	Fencer
	FenceRetention() time.Duration
	// Keep makes the fence keep effectID's item, its newest token (and
	// that token's pass, if it passed), at least until until. It fails
	// when the item is absent, ended, or holds a newer token.
	Keep(ctx context.Context, effectID string, token uint64, until time.Time) error
}

// ReopeningFencer is a Fencer that can forget a token's pass of the point
// of no return (fence.Owner): Resolve, settling a fenced escaped effect as
// not delivered, reopens the fence for the token of its escaped attempt,
// so that the one more attempt it releases the effect for is fenced, and
// fires, like any other. Reopen succeeds when that token passed or none
// did, and in both cases retires that token (when none passed, if it is
// the newest issued): an attempt that stalled before its pass, past its
// lease, is refused the pass once an operator settled it as not
// delivered. It fails when another token passed, with an error that matches
// ErrPassHeld. Any other error leaves it unknown whether the fence was
// reopened; a second Reopen of the same token then succeeds either way.
type ReopeningFencer interface {
	Fencer
	Reopen(ctx context.Context, effectID string, token uint64) error
}
