package ledger

import (
	"context"
	"time"
)

// Clock is a Ledger's time: what time it is (claims, leases, retention and
// every condition compare with Now), how it waits for a live claim held
// elsewhere (Sleep, every Config.PollInterval) and how it paces heartbeats
// (NewTicker, every Config.Heartbeat). Injecting one (TestConfig.Clock)
// makes expiry testable without sleeping; ledgertest.Clock is a manual
// one. It has the shape of idem.Clock, so one test clock drives both
// layers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep pauses for d, returning early with ctx.Err() when ctx ends.
	Sleep(ctx context.Context, d time.Duration) error
	// NewTicker starts a ticker of period d and returns its channel and the
	// function that stops it.
	NewTicker(d time.Duration) (ticks <-chan time.Time, stop func())
}
