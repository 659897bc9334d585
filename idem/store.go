package idem

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idem/internal/respsize"
)

// The room every store keeps for a response is the body limit and 1 MB.
const _ = uint(respsize.Max-MaxResponseBytes-respsize.Room) + uint(MaxResponseBytes+respsize.Room-respsize.Max)

// State is the lifecycle state of a Layer-1 record.
//
//	pending -> completed          (2xx; cached and replayed)
//	        -> terminal-failure   (non-retryable 4xx; cached and replayed)
//	        -> retryable-failure  (408, 429, 499, 5xx, handler error or panic; never replayed,
//	                               a same-key retry reclaims and runs again)
//	        -> deleted            (400 idempotency_key_invalid, 400 validation_error,
//	                               401, 403: outcomes that are never cached)
type State string

// Record states.
const (
	StatePending          State = "pending"
	StateCompleted        State = "completed"
	StateTerminalFailure  State = "terminal-failure"
	StateRetryableFailure State = "retryable-failure"
)

// Final reports whether s is a cached final outcome that is replayed.
func (s State) Final() bool { return s == StateCompleted || s == StateTerminalFailure }

// Valid reports whether s is one of the four record states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateCompleted, StateTerminalFailure, StateRetryableFailure:
		return true
	}
	return false
}

// Response is a cached HTTP response: status, headers (never Set-Cookie) and
// the body, replayed byte-exactly. Header names are canonical MIME header keys
// (as net/http.CanonicalHeaderKey returns them); values keep their order.
//
// NotKept marks a final outcome whose response was not kept: the handler's
// body (or Guard.Once's value) was larger than MaxResponseBytes, or its
// answer through an API Gateway adapter too large for Lambda to return
// (see MaxResponseBytes), or the store refused the response as too large (ErrTooLarge: its headers beyond
// the room kept beside the body, or a store's own smaller limit), or
// refused it for good otherwise (a validation or permission error: not an
// outage, a fence, a write's conflict or a table it cannot use), or the
// Guard could not read the handler's answer (a status outside 100..599,
// recorded as Status 0; an API Gateway body marked base64 that does not
// decode), so the
// attempt that ran recorded only that it ran, with Status the status it
// answered and NotKept the body's size in bytes (for an empty body, the
// size of the response's stored form; always positive), and no headers or
// body. A replay of such a record never runs the handler again:
// it is answered 410 CodeResponseNotKept (Guard.Once: ErrNotKept). Zero
// (every record written before the field existed included) is a kept
// response, read exactly as before.
type Response struct {
	Status  int
	Headers map[string][]string
	Body    []byte
	NotKept int
}

// Record is one Layer-1 idempotency record.
//
// ID is the partition key: a hash of (tenant, operation, key) in the caller
// keyspace (see keyspace.ID); the raw key is never stored. Times are stored with at
// least millisecond precision; a zero Expires means the record never expires.
type Record struct {
	ID           string    // keyspace.ID(tenant, operation, key); never the raw key
	Digest       string    // request digest, stamped with its recipe (see Digest)
	State        State     // lifecycle state
	Owner        string    // lease owner token of the current (or last) claim
	LeaseExpires time.Time // when the claim's lease may be reclaimed (pending only)
	Renewed      time.Time // when the owner last wrote its lease: claim, reclaim or Renew (pending only)
	Attempt      int       // 1 on first claim, +1 on every reclaim
	RequestID    string    // request id of the invocation that first claimed the record
	// RawBodySHA256 is the lowercase hex SHA-256 of the raw request body of
	// the last attempt that ended, exactly as received (after base64
	// decoding of an API Gateway base64 body). The owner's write that ends
	// an attempt stores it (Store.Complete and Store.Release, from the
	// claim record the owner hands them); a claim never writes it, so a
	// replay, an in-flight answer or a mismatch never hashes the body
	// again. A record freshly claimed carries none; a reclaimed one keeps
	// the hash of the attempt before it until its own attempt ends (an
	// owner that crashed wrote none). It is kept for archive beside Digest
	// and never compared (the Guard hands one only under a policy that keeps
	// it, Policy.KeepRawBodyHash: the ERP policy): two requests whose bodies differ in bytes but
	// not in their canonical form (JSON and XML of one work order) share a
	// Digest and replay each other. "" when the ending attempt's caller
	// set none (and then a previous attempt's is removed).
	RawBodySHA256 string
	Response      *Response // final response; set only when State.Final()
	Expires       time.Time // retention end (TTL); zero = never
}

// Expired reports whether the record's retention has ended at now. An
// expired record is treated exactly like an absent one (DynamoDB TTL deletes
// lazily, so stores check expiry in every condition).
func (r *Record) Expired(now time.Time) bool {
	return !r.Expires.IsZero() && !now.Before(r.Expires)
}

// LeaseExpired reports whether a pending record's lease has run out at now.
func (r *Record) LeaseExpired(now time.Time) bool {
	return !now.Before(r.LeaseExpires)
}

// Reclaimable reports whether a claim carrying digest may take the record
// over at now: a retryable failure, or a pending claim whose lease expired,
// with the same digest.
func (r *Record) Reclaimable(digest string, now time.Time) bool {
	if r.Digest != digest {
		return false
	}
	return r.State == StateRetryableFailure || (r.State == StatePending && r.LeaseExpired(now))
}

// ValidateClaim reports whether r can be the record a successful
// Store.Claim returned, as Store.Complete needs it: a digest, state
// pending and an attempt of at least 1. Errors match ErrInvalidRecord.
// (ID and Owner are the fence: a store answers ErrFenced for a non-caller
// ID or an empty owner, as for every write after the claim.)
func (r *Record) ValidateClaim() error {
	if r.Digest == "" || r.State != StatePending || r.Attempt < 1 {
		return fmt.Errorf("%w: not a claimed record (state %q, attempt %d, digest set: %t)",
			ErrInvalidRecord, r.State, r.Attempt, r.Digest != "")
	}
	return nil
}

// Decision is the outcome of Store.Claim. A lost claim is a value, not an
// error.
type Decision int

// Claim decisions.
const (
	// Claimed: no live record existed (absent or retention expired); a new
	// pending record was written with Attempt 1.
	Claimed Decision = iota + 1
	// Reclaimed: a live record with the same digest was retryable-failure, or
	// pending with an expired lease; it was taken over atomically
	// (compare-and-set on the previous owner) and Attempt went up by one.
	Reclaimed
	// Exists: a live record exists and was not claimed (final, pending with a
	// live lease, or a different digest). ClaimResult.Record holds it.
	Exists
)

func (d Decision) String() string {
	switch d {
	case Claimed:
		return "claimed"
	case Reclaimed:
		return "reclaimed"
	case Exists:
		return "exists"
	}
	return "unknown"
}

// ClaimResult is what Store.Claim decided. Record is the record as stored
// after a successful claim, or the existing live record for Exists.
type ClaimResult struct {
	Decision Decision
	Record   Record
	// LeaseExpired is true for a Reclaimed record that was pending with an
	// expired lease (a lease reclaim: its previous owner stalled or
	// crashed), false when it was a retryable failure (a re-run the previous
	// owner released). Only lease reclaims count as
	// openwop.idempotency.reclaims_total.
	LeaseExpired bool
}

// Outcome is the fenced final write of a claim (Store.Complete).
type Outcome struct {
	// State is StateCompleted, StateTerminalFailure or StateRetryableFailure.
	State State
	// Response is the response to cache; required for final states, ignored
	// (not stored) for StateRetryableFailure.
	Response *Response
	// Expires is the new retention end; zero = never.
	Expires time.Time
	// Writes are store-specific business writes committed in ONE transaction
	// with the completion, fenced by the owner token: either all of them and
	// the completion are written, or nothing is. dynamostore accepts
	// github.com/aws/aws-sdk-go-v2/service/dynamodb/types.TransactWriteItem
	// values (or pointers to them); memstore accepts memstore.Write. A store
	// returns ErrUnsupportedWrite for a write it does not understand, and
	// writes nothing.
	Writes []any
}

// Validate reports whether o is an outcome a Store may write: a known
// state, and for a final state a response of at most MaxResponseBytes
// whose headers fit the 1 MB of room kept beside the body (its status,
// header names and values, each with its length, and its body take at
// most MaxResponseBytes + 1 MB), or a not-kept one (Response.NotKept
// positive, with neither headers nor body). Errors match ErrInvalidRecord
// or ErrTooLarge. Stores call it first in Complete, so every store keeps
// the same responses.
func (o Outcome) Validate() error {
	switch o.State {
	case StateCompleted, StateTerminalFailure:
		r := o.Response
		if r == nil {
			return fmt.Errorf("%w: final outcome %s without a response", ErrInvalidRecord, o.State)
		}
		if r.NotKept < 0 || r.NotKept > 0 && (len(r.Body) > 0 || len(r.Headers) > 0) {
			return fmt.Errorf("%w: a response not kept (NotKept %d) carries %d header(s) and %d body bytes",
				ErrInvalidRecord, r.NotKept, len(r.Headers), len(r.Body))
		}
		if len(r.Body) > MaxResponseBytes {
			return fmt.Errorf("%w: %d bytes", ErrTooLarge, len(r.Body))
		}
		if n := respsize.Encoded(r.Status, r.Headers, len(r.Body)); n > respsize.Max {
			// Headers beyond the room every store keeps beside the body:
			// no store keeps it, so that all answer its duplicates alike.
			return fmt.Errorf("%w: the response's status, headers and body take %d bytes stored, more than the %d every store keeps",
				ErrTooLarge, n, respsize.Max)
		}
	case StateRetryableFailure:
	default:
		return fmt.Errorf("%w: outcome state %q", ErrInvalidRecord, o.State)
	}
	return nil
}

// Store persists Layer-1 records. Implementations must be safe for
// concurrent use and every method must be atomic with respect to the others.
// The clock is injected: every method receives now and never reads a clock.
//
// Liveness: Claim (Claimed or Reclaimed) and Renew set the record's Renewed
// to now, and Complete and Release clear it, so a reader can tell an owner
// that still renews its lease (alive) from one that stopped (looks dead).
//
// Raw body hash: a claim writes none, so that a replay, an in-flight
// answer and a mismatch never hash the raw body; Complete and Release
// store the RawBodySHA256 of the claim record the owner hands them, the
// hash of the attempt that ended (see Record.RawBodySHA256).
//
// Fencing: every write after the claim (Complete, Release, Renew, Delete)
// is conditional on the record existing, not expired at now, being pending,
// and holding the caller's owner token. Otherwise it writes nothing and
// returns ErrFenced.
type Store interface {
	// Claim writes rec (State pending, with Owner, LeaseExpires, RequestID,
	// Digest, Expires set by the caller; Attempt, RawBodySHA256 and
	// Response ignored) if no live record exists under rec.ID (Claimed:
	// no RawBodySHA256), or takes over a live record that is
	// Reclaimable(rec.Digest, now) (Reclaimed: Attempt+1, RequestID of the
	// first claim and RawBodySHA256 of the last attempt that ended kept).
	// Otherwise it returns Exists and the live record; when
	// the live record's digest is not rec.Digest (a mismatch, answered
	// without a response) a store may leave its Response nil rather than
	// read a response stored beside the record.
	// A replay (Exists) costs one round trip where the backend can return the
	// old item on a failed conditional write (plus a read of a response
	// stored beside the record, where the store does that).
	// The record returned (its response's header map, value slices and
	// body included) is the caller's: the store keeps no reference to it,
	// and the Guard adds its headers to a replayed response in place.
	// A live final record whose response the store no longer holds whole
	// (a part kept beside the record is gone) is an error matching
	// ErrNotKept, never a partial response and never a claim; beside that
	// error a store may return Exists and the record without its
	// response, so that the answer names the first request.
	Claim(ctx context.Context, rec Record, now time.Time) (ClaimResult, error)

	// Complete writes the outcome of claim, together with out.Writes in one
	// transaction. The lease is cleared, and claim.RawBodySHA256 (set by
	// the caller after the claim: the raw body hash of the attempt that
	// ran) is stored as the record's ("" stores none).
	//
	// claim is the Record Claim returned (Claimed or Reclaimed) to the
	// caller: claim.ID and claim.Owner are the fence, and a store may
	// rewrite the whole record from claim and out in one conditional write
	// (it carries every attribute the claim stored) instead of updating it
	// in place. A claim without digest, state pending or attempt is
	// ErrInvalidRecord (Record.ValidateClaim); nothing is written.
	// out.Response (its header map, value slices and body) is the caller's
	// again once Complete returns: a store copies what it keeps, and the
	// Guard adds its headers to the same map for its answer.
	// A Complete that fails before it sends any write of the record (or
	// of out.Writes), a response part kept beside the record not written,
	// returns an error matching ErrRecordNotSent beside its cause; one
	// whose write was sent, whatever became of it, never does.
	Complete(ctx context.Context, claim Record, out Outcome, now time.Time) error

	// Release marks the claim retryable-failure (a handler error or
	// panic), so a same-key retry reclaims it. claim.ID and claim.Owner are
	// the fence, as for Complete; claim.RawBodySHA256 (the raw body hash of
	// the attempt that ran, set by the caller) is stored as the record's
	// ("" stores none). Nothing else of claim is read.
	Release(ctx context.Context, claim Record, now time.Time) error

	// Renew extends the lease of the claim owned by owner to leaseExpires
	// and sets Renewed to now (heartbeat).
	Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error

	// Delete removes the record owned by owner (outcomes that are never
	// cached: 400 idempotency_key_invalid, 400 validation_error, 401, 403).
	Delete(ctx context.Context, id, owner string, now time.Time) error

	// Get reads the record with strong consistency. An absent or expired
	// record returns found == false. The record returned is the caller's,
	// as Claim's; a final one whose response is no longer held whole is
	// an error matching ErrNotKept, as for Claim, beside which a store may
	// return the record without its response (found); so too beside any
	// other error reading the response of a record it did read (found
	// is then true only for a record read).
	Get(ctx context.Context, id string, now time.Time) (rec Record, found bool, err error)
}
