// Package notkept marks a unit of work's value that ran to completion but
// cannot be kept for its duplicates: an adapter of Guard.Once (idem/event)
// wraps the error of encoding its value in Value, and Once records the
// outcome as not kept, as it does a value over the size limit, instead of
// leaving the key retryable for a function that already ran.
package notkept

// Error is the error of a value that cannot be kept; Err says why.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Value marks err, the reason a value ran to cannot be kept.
func Value(err error) error { return &Error{Err: err} }
