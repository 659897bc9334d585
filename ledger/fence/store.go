package fence

import (
	"context"
	"time"
)

// Store is the linearizable fence owner's persistence: one item per effect
// identity, holding the newest token issued and the token that passed the
// point of no return. Both operations are single conditional writes on one
// item (no transactions). Implementations must be linearizable for the
// fenced-effects guarantee to hold (a table in one home region, or an MRSC
// table; never an MREC global table) and safe for concurrent use. Proven by
// fencetest.Run.
type Store interface {
	// Acquire issues a new token for effectID, atomically: unless a token
	// has passed the point of no return (and the item is still within its
	// retention at now), the stored token becomes stored+1 (seed+1 when the
	// item is absent) and is returned, and the item's retention is extended
	// to expires. When a token has passed, no token is issued: the item's
	// retention is extended to expires (never shortened), and passed
	// describes it (token is then 0). So a pass is kept at least as long as
	// the effect record whose attempts it keeps refusing: every refused
	// attempt extends both.
	//
	// seed must exceed every token that a deleted (expired) earlier item for
	// the same effect may have issued; Owner passes the clock in
	// milliseconds shifted left by 10 bits.
	Acquire(ctx context.Context, effectID string, seed uint64, now, expires time.Time) (token uint64, passed *Passed, err error)

	// Pass records that token passed the point of no return, atomically,
	// if and only if token is the newest token issued for effectID and no
	// token has passed. ok is false otherwise (a stale token), with current
	// describing the stored item (nil if absent). A retried Pass whose first
	// try was applied but whose response was lost reports ok.
	Pass(ctx context.Context, effectID string, token uint64, region string, now time.Time) (ok bool, current *Item, err error)

	// Reopen forgets that token passed effectID's point of no return,
	// atomically, if and only if token is the one that passed: an operator
	// found that the attempt holding it did not reach the provider. The
	// same write retires every token issued so far, so a late Pass of
	// token (the retry of a pass whose answer was lost) is refused, and
	// the next Acquire issues a token again (greater than every token
	// issued before). When no token has passed and token is the newest
	// issued, it is retired all the same (one write): the attempt holding
	// it may have stalled before its pass, and must not pass once its
	// attempt was settled. ok is also true when no token has passed
	// (nothing to forget: an attempt that stopped before its pass, or a
	// retried Reopen whose first try applied); it is false when another
	// token passed, with current describing the stored item.
	Reopen(ctx context.Context, effectID string, token uint64) (ok bool, current *Item, err error)

	// Keep extends the retention of effectID's item to expires (never
	// shortening it), atomically, if and only if token is the newest token
	// issued for it (the one that passed, once one did) and the item is
	// still within its retention at now. ok reports that the item is kept
	// at least until expires; it is false when the item is absent, past its
	// retention, or another token's. The ledger asks it before it writes an
	// escaped attempt's record to be kept longer than the token's issue
	// kept the item, so a pass is never forgotten while a record holding
	// it is kept.
	Keep(ctx context.Context, effectID string, token uint64, now, expires time.Time) (ok bool, err error)

	// Get returns the stored item for effectID, or nil (strongly
	// consistent). For audits and tests.
	Get(ctx context.Context, effectID string) (*Item, error)
}

// Passed describes the token that passed an effect's point of no return.
type Passed struct {
	// Token is the token that passed.
	Token uint64
	// Region is the region the passing executor ran in ("" if unknown).
	Region string
	// At is when it passed.
	At time.Time
}

// Item is the stored state of one effect's fence.
type Item struct {
	// EffectID is the effect identity.
	EffectID string
	// Token is the newest token issued, or retired by a Reopen (then no
	// attempt holds it, and the next Acquire issues the one above it).
	Token uint64
	// Passed is the token that passed the point of no return, nil if none.
	Passed *Passed
	// ExpiresAt is the retention deadline.
	ExpiresAt time.Time
}
