package ledger

import (
	"github.com/idemkit/idemkit/ledger/identity"
	"slices"
	"time"
)

// State is the state of an effect (or slot) record as a whole.
//
//	claimed  --fire mark-->  firing  --outcome-->  completed (final)
//	claimed|firing --owner gives up / reclaim--> released (claimable)
//
// Without a Config.Fencer a claim (or reclaim) is written in firing
// directly: the claim is the fire mark. A record in claimed or firing has
// an owner holding a lease until LeaseUntil; after that any executor may
// reclaim it atomically.
type State string

const (
	// StateClaimed: an owner holds the claim and has not passed the fire mark
	// (only with a Config.Fencer, between the claim and the fire mark).
	StateClaimed State = "claimed"
	// StateFiring: the owner passed the point of no return; the provider may
	// have been reached.
	StateFiring State = "firing"
	// StateReleased: no owner; the next executor claims it (never used for
	// host slots, which are never released).
	StateReleased State = "released"
	// StateCompleted: an outcome (success or failure) is recorded; final.
	StateCompleted State = "completed"
)

// AttemptState is the witness state of one attempt (the OpenWOP projection
// vocabulary): claimed -> completed | released | escaped.
type AttemptState string

const (
	// AttemptClaimed: the attempt holds (or held, if it is still running) the
	// claim.
	AttemptClaimed AttemptState = "claimed"
	// AttemptCompleted: the attempt recorded the outcome.
	AttemptCompleted AttemptState = "completed"
	// AttemptReleased: the attempt ended without reaching the provider.
	AttemptReleased AttemptState = "released"
	// AttemptEscaped: the attempt passed the fire mark and its result is
	// unknown: it may have reached the provider. The next attempt reuses the
	// same provider key, so a deduplicating provider collapses both. Also
	// (never Fired) an attempt the fence refused because it holds the pass
	// of an escaped attempt whose record lapsed: the record then carries
	// that pass's token (Record.Fence), for a resolution to reopen.
	AttemptEscaped AttemptState = "escaped"
)

// Attempt is one attempt at an effect: one witness row.
type Attempt struct {
	// N is the attempt number, from 1.
	N int
	// State is the attempt's witness state.
	State AttemptState
	// At is when the attempt last changed state: its claim, then its
	// outcome (completed), or when it was closed (released, or escaped: by
	// its own executor on an uncertain result, or by the executor that
	// reclaimed it).
	At time.Time
	// Fired is true once the attempt passed the fire mark (without a
	// Config.Fencer, from its claim on).
	Fired bool
	// FiredAt is when the attempt passed the fire mark (zero if it never
	// did): the time the request may have left for the provider. An escaped
	// attempt is shown at FiredAt in the witness, never at the time it was
	// reclaimed.
	FiredAt time.Time
	// RunID, NodeID and InvocationID say who made the attempt (witness
	// fields; RunID may be empty for an effect reached outside a run).
	RunID, NodeID, InvocationID string
	// Operator is set on an operator's resolution of an escaped effect
	// (Ledger.Resolve): who resolved it, with Note. Such a row never fires.
	Operator, Note string
}

// Outcome is a recorded effect outcome. It is what a duplicate receives.
type Outcome struct {
	// OK is true for success; false for a recorded failure.
	OK bool
	// Value is the recorded result of a successful effect (nil for a
	// streamed effect, whose body is never cached).
	Value []byte
	// Streamed marks an effect whose body was streamed and not cached.
	Streamed bool
	// Error is the recorded failure message: always valid UTF-8 (a byte
	// of the error's text that is no part of a character is recorded as
	// U+FFFD), its first 1 KiB, cut before a character that would not fit
	// whole.
	Error string
	// Dropped marks a success whose value exceeded Config.MaxValueBytes and
	// was not recorded (Value is nil).
	Dropped bool
	// BodyDigest and BodySize describe a streamed body (Streamed) instead of
	// caching it: the SHA-256 (64 lower-case hex characters) and the length
	// in bytes of what the effect streamed (Ledger.DoStream), or of the
	// value it returned (Do with Effect.Streamed). Empty and 0 otherwise.
	BodyDigest string
	BodySize   int64
}

// Record is one effect (or host slot) in the ledger: the unit every Store
// operation reads and writes whole. It is one item per effect, holding every
// attempt; the witness rows are derived from Attempts, so no write ever spans
// two items (no transactions, global-table ready).
type Record struct {
	// Key is the store key: "effect#" + EffectID, or "host#" + hash for a
	// slot. The two domains can never collide (an effectId has no '#').
	Key string
	// Kind is effect or slot.
	Kind identity.Kind
	// EffectID is the effect's identity (empty for slots).
	EffectID string
	// Tenant is the effect's tenant.
	Tenant string
	// Keying and IdentityRecipe stamp how EffectID was made.
	Keying         identity.Keying
	IdentityRecipe string
	// SemanticRecipe and RequestDigest are the request's semantic digest and
	// its recipe stamp (both may be empty).
	SemanticRecipe string
	RequestDigest  string
	// ProviderKey is the idempotency key the provider receives.
	ProviderKey string
	// RunID is the run that created the record: the witness index
	// (GET /runs/{runId}/effects). Empty outside a run.
	RunID string
	// State is the record state.
	State State
	// Owner is the owner token of the current (or last) attempt. Every write
	// after the claim is conditional on it.
	Owner string
	// Attempt is the current attempt number (= len(Attempts)).
	Attempt int
	// LeaseUntil is when the owner's claim expires.
	LeaseUntil time.Time
	// Fence is the highest fencing token written (0: unfenced). A write whose
	// Fence is lower than the stored one is rejected (see Fencer).
	Fence uint64
	// Outcome is set once State is completed.
	Outcome *Outcome
	// MaxAttempts is the effect's attempt cap (Retry.MaxAttempts, else
	// the creating Ledger's Config.MaxAttempts; 0, in records written
	// before the cap was always recorded: the reading Ledger's
	// Config.MaxAttempts) and Deadline the end of its time budget (zero:
	// none), both fixed when the record is created.
	MaxAttempts int
	Deadline    time.Time
	// NotBefore is the earliest time of the next attempt of a released
	// record (zero: now): the durable retry schedule (see Retry).
	NotBefore time.Time
	// Attempts lists every attempt, oldest first.
	Attempts []Attempt
	// CreatedAt and UpdatedAt are bookkeeping times.
	CreatedAt, UpdatedAt time.Time
	// ExpiresAt is the retention deadline (DynamoDB TTL). A record past it is
	// treated as absent by every condition, whether or not it was deleted.
	ExpiresAt time.Time
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	c.Attempts = slices.Clone(r.Attempts)
	if r.Outcome != nil {
		o := *r.Outcome
		o.Value = slices.Clone(r.Outcome.Value)
		c.Outcome = &o
	}
	return &c
}

// Live reports whether r is inside its retention at now.
func (r *Record) Live(now time.Time) bool { return now.Before(r.ExpiresAt) }

// last returns the current attempt.
func (r *Record) last() *Attempt {
	if len(r.Attempts) == 0 {
		return nil
	}
	return &r.Attempts[len(r.Attempts)-1]
}
