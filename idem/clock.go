package idem

import (
	"context"
	"time"
)

// Clock is the Guard's one source of time: record and lease times, the
// wait of a duplicate for the first request's outcome and its poll
// backoff (Sleep), and the lease heartbeat (NewTicker; the system clock,
// and idemtest.ClockFuncs without a NewTickerFunc, pace it with one timer
// re-armed at the ticker's cadence instead). It has the shape
// of ledger.Clock, so one test clock drives both layers. The default is
// the system clock; only a test sets another (TestConfig.Clock). The
// context's deadline (the Lambda deadline) is wall time by nature and is
// read as such.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep pauses for d, returning early with ctx.Err() when ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
	// NewTicker starts a ticker of period d and returns its channel and the
	// function that stops it.
	NewTicker(d time.Duration) (ticks <-chan time.Time, stop func())
}

// TestConfig holds the hooks a test (or a development tool) sets; a
// production Config leaves it zero.
type TestConfig struct {
	// Clock is the Guard's clock (see Clock). Default the system clock.
	Clock Clock
}
