package ledger

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Retry is an effect's retry schedule. Its attempt cap and time budget are
// recorded on the effect record when the record is created (Record.MaxAttempts,
// Record.Deadline), so every executor and every entry point applies the same
// ones; the backoff is applied by the executor whose attempt ended.
//
// When an attempt ends without an outcome (its effect function returned an
// error wrapping ErrNotSent or ErrUncertain), the record is released with
// Record.NotBefore set to the time of the next attempt: the later of
// now + backoff and the time the provider asked for (RetryAt, e.g. from a
// Retry-After header). Do then returns *RetryLaterError naming that time,
// and any Do of the effect before it fires nothing and returns
// *RetryLaterError again (one store round trip): the schedule is durable, in
// the record, so nothing has to sleep for it and a crash loses nothing.
// When the next attempt would pass the attempt cap or start after the
// deadline, no attempt is scheduled and Do returns *AttemptsExhaustedError.
type Retry struct {
	// MaxAttempts caps the attempts at the effect ("attempt n of N").
	// Default (0) and maximum Config.MaxAttempts (a larger value is capped
	// to it).
	MaxAttempts int
	// Budget is the time, from the effect's first attempt, after which no
	// new attempt starts. Default 0: no time budget (only MaxAttempts).
	Budget time.Duration
	// Base is the first backoff, doubled after each attempt up to Max.
	// Default DefaultRetryBase (1 s).
	Base time.Duration
	// Max caps the backoff. Default DefaultRetryMax (5 min). Any positive
	// Duration is honoured: the doubling stops at Max, however large.
	Max time.Duration
}

func (r *Retry) validate(maxAttempts int) error {
	if r == nil {
		return nil
	}
	if r.MaxAttempts < 0 {
		return fmt.Errorf("%w: Retry.MaxAttempts %d is negative", ErrConfig, r.MaxAttempts)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Budget", r.Budget}, {"Base", r.Base}, {"Max", r.Max}} {
		if d.v < 0 {
			return fmt.Errorf("%w: Retry.%s %s is negative", ErrConfig, d.name, d.v)
		}
	}
	return nil
}

// backoff returns the delay before attempt n+1 after attempt n (n >= 1):
// Base * 2^(n-1), capped at Max, with "equal jitter" (half fixed, half
// random) so that retries of many effects spread out.
func (r *Retry) backoff(n int, jitter func(time.Duration) time.Duration) time.Duration {
	base, maxD := DefaultRetryBase, DefaultRetryMax
	if r.Base > 0 {
		base = r.Base
	}
	if r.Max > 0 {
		maxD = r.Max
	}
	d := min(base, maxD)
	for i := 1; i < n && d < maxD; i++ {
		// Saturate at maxD before doubling: d*2 of a d above half the
		// largest Duration (a Max above ~146 years) would overflow into a
		// negative delay (RED_TEAM 320).
		if d > maxD/2 {
			d = maxD
			break
		}
		d *= 2
	}
	return jitter(d)
}

// equalJitter returns d/2 + a uniform random duration in [0, d/2].
func equalJitter(d time.Duration) time.Duration {
	h := d / 2
	return h + rand.N(h+1)
}

// RetryLaterError says the effect has no outcome yet and its next attempt is
// due at At (Record.NotBefore): the caller comes back then (e.g. schedules
// its run to wake at At). It is returned by the Do whose attempt ended
// without an outcome (Cause is that attempt's error, so errors.Is(err,
// ErrUncertain) or ErrNotSent still hold), and by every Do before At
// (Cause nil: nothing fired).
type RetryLaterError struct {
	EffectID string
	// At is the earliest time of the next attempt.
	At time.Time
	// Attempt is the number of attempts made so far; MaxAttempts the cap.
	Attempt, MaxAttempts int
	// Deadline is the end of the time budget (zero: none).
	Deadline time.Time
	// Cause is the ended attempt's error (nil when nothing fired).
	Cause error
}

func (e *RetryLaterError) Error() string {
	s := fmt.Sprintf("ledger: effect %s: attempt %d of %d without an outcome; next attempt at %s",
		e.EffectID, e.Attempt, e.MaxAttempts, e.At.UTC().Format(time.RFC3339))
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is matches ErrRetryLater.
func (e *RetryLaterError) Is(target error) bool { return target == ErrRetryLater }

// Unwrap returns Cause.
func (e *RetryLaterError) Unwrap() error { return e.Cause }

// retryAtError carries the time a provider asked to be retried at.
type retryAtError struct {
	err error
	at  time.Time
}

func (e *retryAtError) Error() string { return e.err.Error() }
func (e *retryAtError) Unwrap() error { return e.err }

// RetryAt wraps an effect function's error (NotSent or Uncertain) with the
// time the provider asked to be retried at (e.g. a 429 or 503 with
// Retry-After): the next attempt is scheduled no earlier than at, even when
// the backoff would be shorter.
func RetryAt(err error, at time.Time) error { return &retryAtError{err: err, at: at} }

// requestedAt returns the time set with RetryAt in err's chain, if any.
func requestedAt(err error) (time.Time, bool) {
	var ra *retryAtError
	if errors.As(err, &ra) {
		return ra.at, true
	}
	return time.Time{}, false
}

// attemptCap is the record's attempt cap.
func (l *Ledger) attemptCap(r *Record) int {
	if r.MaxAttempts > 0 {
		return r.MaxAttempts
	}
	return l.cfg.MaxAttempts
}

// pastBudget reports whether the time budget leaves no new attempt at now:
// the deadline has passed, or the next attempt of the released record is
// due at or after it.
func pastBudget(r *Record, now time.Time) bool {
	if r.Deadline.IsZero() {
		return false
	}
	return !now.Before(r.Deadline) || (r.State == StateReleased && !r.NotBefore.Before(r.Deadline))
}
