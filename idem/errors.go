package idem

import (
	"errors"
	"fmt"
)

// The sentinel errors, matched with errors.Is. Typed errors (*ConfigError,
// *KeyError, *canon.ValidationError) match their sentinel
// too.
var (
	// ErrConfig is matched (errors.Is) by every *ConfigError.
	ErrConfig = errors.New("idem: invalid config")

	// ErrKeyInvalid is matched (errors.Is) by every *KeyError.
	ErrKeyInvalid = errors.New("idem: invalid Idempotency-Key")

	// ErrNoClaim is returned by Transact when the request is not running under
	// an idempotency claim (no key, a skipped route, a safe method, or
	// idempotency disabled). The handler must then write on its own.
	ErrNoClaim = errors.New("idem: no idempotency claim in context")

	// ErrBadStatus is the error logged for a handler response whose status
	// is not 100..599. The handler returned, its work done: a keyed
	// request's attempt is recorded as run, its response not kept (see
	// Guard), and the handler does not run again for the key.
	ErrBadStatus = errors.New("idem: handler returned an invalid status")

	// ErrLeaseLost is the cause (context.Cause) with which a handler's context
	// is cancelled when its heartbeat finds the lease reclaimed by another
	// invocation (a fenced renewal), or cuts the lease short: a renewal
	// failed (the store unavailable, throttled, timed out) and the next
	// could no longer come before the lease written last ends. The context
	// ends before that lease end, so no same-key retry reclaims the record
	// while it is live. Once the record is taken over, whatever the handler
	// returns is not recorded (its completion is fenced); a cut handler
	// whose record nobody took over can still complete.
	ErrLeaseLost = errors.New("idem: lease lost to another invocation")

	// ErrInvalidJSON is returned (wrapped, with the JCS error) for a body on a
	// JSON route that is not strict RFC 8785 input: a syntax error, a duplicate
	// key, a lone surrogate, invalid UTF-8, an out-of-range number, or a number
	// that no double holds exactly (jcs.ErrInexactNumber: RFC 8785 writes every
	// number as a double, so 12345678901234567890 and 12345678901234567891
	// would hash equal). The middleware answers it 400 validation_error, naming
	// the member of an inexact number, and caches nothing.
	ErrInvalidJSON = errors.New("idem: request body is not valid JSON")

	// ErrUnsupportedMediaType is returned (wrapped) by a Contract.Decode that
	// does not take the body's media type: 415 unsupported_media_type.
	ErrUnsupportedMediaType = errors.New("idem: unsupported media type")

	// Store errors, matched with errors.Is.

	// ErrFenced: a write after the claim was rejected because the caller no
	// longer owns the record (reclaimed, completed, deleted, or expired).
	// Nothing was written.
	ErrFenced = errors.New("idem: fenced: not the record's owner")
	// ErrWriteConflict: a business write in Outcome.Writes failed its own
	// condition; the transaction was cancelled and nothing was written.
	// A store that can tell which write failed returns a
	// *WriteConflictError naming it.
	ErrWriteConflict = errors.New("idem: transactional write condition failed")
	// ErrUnsupportedWrite: Outcome.Writes holds a value the store cannot
	// apply. Nothing was written.
	ErrUnsupportedWrite = errors.New("idem: unsupported transactional write")
	// ErrTooLarge: the response exceeds what the store can hold (at least
	// MaxResponseBytes is always accepted).
	ErrTooLarge = errors.New("idem: response too large to store")
	// ErrInvalidRecord: the record passed to Claim is malformed (empty ID,
	// digest or owner, a non-caller-keyspace ID, ...).
	ErrInvalidRecord = errors.New("idem: invalid record")
	// ErrRecordNotSent: Complete failed before its write of the record was
	// sent, so the record is as the claim left it (pending, this claim's):
	// a response part the store keeps beside the record could not be
	// written, say. A store wraps it, with the cause (ErrStoreUnavailable
	// for an outage), only when it knows that no write of the record (nor
	// of Outcome.Writes) was sent; a write that was sent and failed, its
	// outcome unknown, never matches it. Without Outcome.Writes the
	// Guard then records the not-kept outcome (one smaller write), so
	// that the handler, which ran, does not run again once the lease ends.
	ErrRecordNotSent = errors.New("idem: the completion's write of the record was not sent")

	// Errors of work run by Guard.Once (and so by the idem/event adapters),
	// matched with errors.Is.

	// ErrNoEventKey: the work's key (Work.Key, event.Config.Key) is empty. The function did
	// not run and nothing was written; the event should fail (and be
	// retried or dead-lettered) rather than run without deduplication.
	ErrNoEventKey = errors.New("idem: event has no idempotency key")
	// ErrPayloadMismatch: the key was already used by an event with a
	// different payload (the HTTP adapters' 409 idempotency_key_mismatch).
	// The function did not run and the recorded outcome is untouched.
	ErrPayloadMismatch = errors.New("idem: idempotency key already used with a different payload")
	// ErrInFlight: another invocation holds a live claim on the key and did
	// not finish within Config.Wait (the HTTP adapters' 409
	// idempotency_in_flight). The function did not run; retry the event
	// later.
	ErrInFlight = errors.New("idem: an invocation with this idempotency key is still running")
	// ErrStoreUnavailable: the idempotency store could not be reached to
	// claim the key (the error is logged, with keys hashed). The function
	// did not run; retry the event. Stores wrap it too, in the errors of
	// calls that were throttled, got a 5xx, could not connect or got no
	// answer in time; the HTTP adapters answer those 503
	// idemkit.store_unavailable with Retry-After (CodeStoreUnavailable).
	ErrStoreUnavailable = errors.New("idem: idempotency store unavailable")
	// ErrStoreMisconfigured: the store's table is missing or was created
	// with another key schema: a wiring mistake, not an outage, so
	// retrying will not help. The function did not run. Stores wrap it
	// (idem/dynamostore does, on a ResourceNotFoundException or a
	// ValidationException about the key); the Guard logs it once with what
	// to fix, counts MetricStoreMisconfigured and the HTTP adapters answer
	// 500 idemkit.server_configuration_error (CodeServerConfiguration),
	// without Retry-After. `idemkit doctor` shows how a deployed table
	// differs from template.yaml.
	ErrStoreMisconfigured = errors.New("idem: idempotency store misconfigured")
	// ErrNotCommitted: fn returned a value but the completion transaction,
	// with the writes registered through Transact, failed (a write's own
	// condition, or the store): nothing was committed and the record is left
	// retryable. A completion that failed as a store outage and landed with
	// its every answer lost is recognised as committed (the release, fenced
	// by the claim's owner token, is refused, and the record read back is
	// this claim's completion, or, when the release fails as an outage
	// too, the record read back all the same, bounded to a second): Once
	// returns the value then, never this error. When that read fails, or
	// the release fails otherwise, the outcome is unknown: this error,
	// wrapping the store's outage, is returned, and retrying the event
	// replays the value if it committed, or runs it once the lease has
	// ended if it did not. The
	// store's error is wrapped: errors.Is(err, ErrWriteConflict) (a
	// *WriteConflictError) says a write's own condition failed, which a
	// retry meets again; otherwise retry the event.
	ErrNotCommitted = errors.New("idem: the event's outcome and its transactional writes were not committed")
	// ErrNotKept: the key's work already ran to a value, returned once to
	// the call that ran it, but the value was larger than MaxResponseBytes,
	// so only that it ran was recorded, not the value. The function did not
	// run and never runs again for this key while the record is retained:
	// nothing is lost by not retrying, and retrying gets ErrNotKept again
	// (the HTTP adapters' 410 CodeResponseNotKept).
	//
	// A Store returns it too, wrapped, from Claim and Get, when it holds
	// the key's final record but no longer all of its response (a part
	// kept beside the record is gone: its backend lost it, or removed it
	// before the record, as a TTL deletion may): the work ran, and its
	// answer can never be replayed byte-exactly. The Guard answers such a
	// replay the same way (410, Guard.Once this error), never runs the
	// work again while the record is kept, and logs it as an error. It is
	// not an outage: a retry gets the same answer.
	//
	// The event adapters (idem/event) return an error matching it, with the
	// decoding error, for a key whose recorded value does not decode into
	// the adapter's value type (another wrapping of the operation recorded
	// it): the work ran and never runs again, and its value cannot be
	// given back; the SQS adapter acknowledges such a message.
	ErrNotKept = errors.New("idem: the key's work already ran; its value was not kept")
	// ErrEventPanic wraps a panic of the wrapped function, which is treated
	// as an error: the record is left retryable.
	ErrEventPanic = errors.New("idem: event handler panicked")
)

// WriteConflictError is ErrWriteConflict naming the write: the completion
// transaction was cancelled because the business write at Index in
// Outcome.Writes failed its own condition (the first such write, where
// several did), and nothing was written. Index is -1 when the store cannot
// tell which write it was. A store returns it (errors.As) for every
// ErrWriteConflict it can attribute; the Guard hands the write's cause to
// the handler's answer (TransactOr, OnConflict).
type WriteConflictError struct {
	Index int
	// Err is the store's own error, for the logs (may be nil).
	Err error
}

func (e *WriteConflictError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%v: write %d", ErrWriteConflict, e.Index)
	}
	return fmt.Sprintf("%v: write %d: %v", ErrWriteConflict, e.Index, e.Err)
}

// Is makes a *WriteConflictError match ErrWriteConflict.
func (e *WriteConflictError) Is(target error) bool { return target == ErrWriteConflict }

// Unwrap returns the store's own error.
func (e *WriteConflictError) Unwrap() error { return e.Err }
