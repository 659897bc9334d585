package ledger

import (
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"time"
)

// The sentinel errors, matched with errors.Is; each typed error matches
// its sentinel too.
var (
	// ErrInFlight is matched by *InFlightError: a live claim is held by
	// another executor and did not finish within the bounded wait.
	ErrInFlight = errors.New("ledger: effect in flight elsewhere")
	// ErrMismatch is matched by *MismatchError: the request differs from the
	// one recorded under the same identity.
	ErrMismatch = errors.New("ledger: request does not match the recorded effect")
	// ErrEffectFailed is matched by *FailedError: the effect's recorded
	// outcome is a failure (returned to the first executor and to every
	// duplicate).
	ErrEffectFailed = errors.New("ledger: effect failed")
	// ErrLeaseLost: this executor's claim was reclaimed by another one, so its
	// write was refused (the new owner's record is untouched).
	ErrLeaseLost = errors.New("ledger: claim lost to another executor")
	// ErrOutcomeNotRecorded is matched by Do's error when the effect
	// function returned but its outcome could not be written (the store
	// failed, or did not answer within Config.OutcomeTimeout): the effect
	// may have happened, nothing says how it ended, and the attempt stays
	// firing; once its lease ends the next Do reclaims it as escaped and
	// fires with the same provider key. The caller treats it as an attempt
	// left in flight (call Do again after the lease), never as the
	// effect's failure.
	ErrOutcomeNotRecorded = errors.New("ledger: outcome not recorded")
	// ErrStaleFence: the fencing token was older than the one recorded; the
	// effect was not fired.
	ErrStaleFence = errors.New("ledger: stale fencing token")
	// ErrAttemptsExhausted is matched by *AttemptsExhaustedError: the effect
	// reached Config.MaxAttempts attempts without a recorded outcome; nothing
	// more fires.
	ErrAttemptsExhausted = errors.New("ledger: effect attempts exhausted")
	// ErrNotSent marks an effect function error meaning the request certainly
	// did not reach the provider: the attempt is released, nothing is
	// recorded, and a later Do tries again. Wrap it (see NotSent).
	ErrNotSent = errors.New("ledger: effect not sent")
	// ErrUncertain marks an effect function error meaning the request may
	// have reached the provider (e.g. a timeout after sending): the attempt
	// becomes escaped, nothing is recorded, and a later Do retries with the
	// same provider key. Wrap it (see Uncertain).
	ErrUncertain = errors.New("ledger: effect outcome uncertain")
	// ErrInvalidIdentity is matched (errors.Is) by every identity input error.
	ErrInvalidIdentity = identity.ErrInvalid
	// ErrUnsupportedRecipe is returned when a recipe stamp names a recipe this
	// version of the kit does not compute (e.g. a v1 history): the caller must
	// use the recorded identities and digests as they are, never recompute them
	// under another recipe (recipe stamps).
	ErrUnsupportedRecipe = identity.ErrUnsupportedRecipe
	// ErrNoScan: ListEffects without a run on a store that is not a Scanner.
	ErrNoScan = errors.New("ledger: this store cannot list every effect; give a run")
	// ErrRetryLater is matched by *RetryLaterError.
	ErrRetryLater = errors.New("ledger: effect retry scheduled")
	// Errors of Resolve.
	// ErrEffectNotFound: no live effect record has this id.
	ErrEffectNotFound = errors.New("ledger: effect not found")
	// ErrNotEscaped: the effect is not escaped (it has an outcome, is in
	// flight, or never fired), so there is nothing for an operator to settle.
	ErrNotEscaped = errors.New("ledger: effect is not escaped")
	// ErrChanged: the effect changed since it was shown (its Rev differs);
	// show it again and decide on what it is now.
	ErrChanged = errors.New("ledger: effect changed since it was shown")
	// ErrFenceReopened comes with the error of a not-delivered resolution of
	// a fenced effect whose record write was refused (ErrChanged) or failed
	// after it had reopened the fence for the escaped attempt's token (it
	// reopens first, so that no resolution is written whose attempt the
	// fence refuses). Nothing was recorded, but the fence no longer holds
	// that attempt's pass: unless the effect has an outcome by then (a
	// concurrent delivered resolution won), its next try fires it once,
	// with the same provider key, as the resolution would have let it; with
	// an outcome, the next try answers from it and fires nothing.
	ErrFenceReopened = errors.New("ledger: the fence was reopened for the escaped attempt, though the resolution was not recorded: unless the effect has an outcome, its next try fires it once")
	// ErrFenceReopenUnknown comes with the error of a not-delivered
	// resolution of a fenced effect whose reopen of the fence failed
	// without the fence refusing it (its answer lost past the SDK's
	// retries, a timeout): the fence may have been reopened for the escaped
	// attempt's token, and nothing was recorded. Resolving again (the
	// record is unchanged) records it: a reopen of a token that no longer
	// holds the pass succeeds.
	ErrFenceReopenUnknown = errors.New("ledger: the fence may have been reopened, but the resolution was not recorded")
	// ErrResolveNeedsFence: Resolve was asked to settle a fenced effect
	// (one whose attempts took fencing tokens) by a Ledger without a
	// Fencer, or as not delivered by one whose Fencer cannot reopen the
	// fence (ReopeningFencer). Under fenced-effects the effect's record is
	// decided in the fence's (home) region, which a ledger without the
	// fence cannot tell from a replica (a resolution written into a replica
	// replicates over the home record), and the fence would keep refusing
	// the next attempt a not-delivered resolution grants. Nothing is
	// written; resolve it with the deployment's fence (idemkit effects
	// resolve --fence-table, --fence-region).
	ErrResolveNeedsFence = errors.New("ledger: resolving a fenced effect needs its fence")
	// ErrPassHeld is what a Fencer's Token error matches (fence.ErrIssued
	// does) when the fence refused the token because another one passed
	// the point of no return, and keeps that pass at least Config.Retention
	// from the refusal: Do then keeps the effect record, whose attempt it
	// releases, as long. For any other Token error the record is kept no
	// longer than the refused claim's lease needs, so that it never
	// outlives the fence's item.
	ErrPassHeld = errors.New("ledger: the fence holds a token that passed the point of no return")
	// ErrReplaySourceMissing is returned by Replay when the source run
	// recorded no terminal outcome for the effect: no record, or a record
	// still claimed, firing, escaped or released; it is matched by
	// *ReplaySourceMissingError. The caller fails the node closed (the
	// OpenWOP error code replay_source_missing) and performs nothing.
	ErrReplaySourceMissing = errors.New("ledger: replay source missing")
	// ErrStoreMisconfigured: the store's table is missing or was created
	// with another key schema, a wiring mistake that retrying will not fix.
	// Nothing fired. Stores wrap it (ledger/dynamostore does, on a
	// ResourceNotFoundException or a ValidationException about the key);
	// the Ledger counts MetricStoreMisconfigured and logs it once with what
	// to fix. `idemkit doctor` shows how a deployed table differs from
	// template.yaml.
	ErrStoreMisconfigured = errors.New("ledger: effects store misconfigured")
	// ErrConfig is matched (errors.Is) by every error New returns: one
	// error listing every problem of the Config. Do's refusal of an
	// Effect.Retry with a negative field matches it too.
	ErrConfig = errors.New("ledger: invalid config")
)

// NotSent wraps err so that Do releases the attempt (see ErrNotSent).
func NotSent(err error) error { return fmt.Errorf("%w: %w", ErrNotSent, err) }

// Uncertain wraps err so that Do marks the attempt escaped (see ErrUncertain).
func Uncertain(err error) error { return fmt.Errorf("%w: %w", ErrUncertain, err) }

// InFlightError says a live claim is held elsewhere.
type InFlightError struct {
	EffectID string
	// RetryAfter is the time left on the holder's lease (at least 1s).
	RetryAfter time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("ledger: effect %s in flight elsewhere; retry after %s", e.EffectID, e.RetryAfter)
}

// Is matches ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// MismatchError says the request's semantic digest (or its recipe, or the
// identity recipe) differs from the recorded one. The recorded outcome is
// never returned with it.
type MismatchError struct {
	EffectID string
	// Field is what differs: "requestDigest", "semanticRecipe",
	// "identityRecipe" or "kind".
	Field string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("ledger: effect %s: %s differs from the recorded request", e.EffectID, e.Field)
}

// Is matches ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// FailedError is a recorded failure outcome.
type FailedError struct {
	EffectID string
	// Message is the recorded failure message.
	Message string
	// Replayed is true when the failure was recorded by an earlier attempt.
	Replayed bool
	// Cause is the effect function's error (only for the call that ran it).
	Cause error
}

// Unwrap returns Cause.
func (e *FailedError) Unwrap() error { return e.Cause }

func (e *FailedError) Error() string {
	return fmt.Sprintf("ledger: effect %s failed: %s", e.EffectID, e.Message)
}

// Is matches ErrEffectFailed.
func (e *FailedError) Is(target error) bool { return target == ErrEffectFailed }

// AttemptsExhaustedError says an effect has Config.MaxAttempts attempts and
// none recorded an outcome: Do fired nothing. The record is kept as is (its
// last attempt closed as escaped or released) for an operator to resolve; it
// becomes claimable again only when it passes its retention.
type AttemptsExhaustedError struct {
	EffectID string
	// Attempts is the number of attempts recorded, MaxAttempts the cap.
	Attempts, MaxAttempts int
	// Escaped is true when at least one attempt may have reached the
	// provider (state escaped).
	Escaped bool
	// Budget is true when the time budget (Retry.Budget), not the attempt
	// cap, ended the retries; Deadline is its end.
	Budget   bool
	Deadline time.Time
	// Cause is the last attempt's error, when this call made it.
	Cause error
}

func (e *AttemptsExhaustedError) Error() string {
	why := fmt.Sprintf("attempt cap %d reached", e.MaxAttempts)
	if e.Budget {
		why = "retry budget ended at " + e.Deadline.UTC().Format(time.RFC3339)
	}
	s := fmt.Sprintf("ledger: effect %s: %d attempts without an outcome, %s (escaped: %v); not firing again", e.EffectID, e.Attempts, why, e.Escaped)
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns Cause.
func (e *AttemptsExhaustedError) Unwrap() error { return e.Cause }

// Is matches ErrAttemptsExhausted.
func (e *AttemptsExhaustedError) Is(target error) bool { return target == ErrAttemptsExhausted }

// unrecordedError is Do's error when the outcome write failed: its text
// names the effect, what the function returned (verdict) and the store's
// error; it matches ErrOutcomeNotRecorded and unwraps to the store's error.
type unrecordedError struct {
	effectID, verdict string
	err               error
}

func (e *unrecordedError) Error() string {
	if e.verdict == "" {
		return fmt.Sprintf("ledger: recording the outcome of %s: %v", e.effectID, e.err)
	}
	return fmt.Sprintf("ledger: recording the outcome of %s (%s): %v", e.effectID, e.verdict, e.err)
}

func (e *unrecordedError) Unwrap() error { return e.err }

// Is matches ErrOutcomeNotRecorded.
func (e *unrecordedError) Is(target error) bool { return target == ErrOutcomeNotRecorded }
