package clock

import (
	"context"
	"time"
)

// What is wall time by nature and no injected clock may govern: a
// context's deadline (the Lambda invocation's), a deadline handed to
// context.WithDeadline, a timestamp another system reads (a trace id).
// Code under the clock rule (internal/archtest) reads it here, never
// through the time package, so every read of time is either an injected
// clock's or one of these.

// Wall returns the wall-clock time (time.Now), for a deadline compared
// with or handed to a context, never for what an injected clock governs.
func Wall() time.Time { return time.Now() }

// Before reports whether the wall clock has not yet reached deadline:
// Wall().Before(deadline), read from the monotonic clock alone when
// deadline carries a monotonic reading (one computed from a reading of the
// system clock), which costs about half a Wall reading.
func Before(deadline time.Time) bool { return time.Until(deadline) > 0 }

// Remaining returns the wall time left until ctx's deadline, and whether
// ctx has one (a negative duration when it has passed).
func Remaining(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
}
