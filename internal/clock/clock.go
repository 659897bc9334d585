// Package clock holds the one context-aware sleep of the module and the
// system clock that the packages with an injected clock default to.
package clock

import (
	"context"
	"time"
)

// Sleep pauses for d or until ctx is done, whichever comes first. It returns
// nil after a full pause and ctx.Err() when ctx ended it (or was already done
// and d is not positive).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// System is the real clock: time.Now, Sleep and a time.Ticker.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Sleep is the package's Sleep.
func (System) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

// NewTicker starts a time.Ticker of period d and returns its channel and
// its Stop.
func (System) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// AfterFunc calls f in its own goroutine after d and returns its timer
// (time.AfterFunc).
func (System) AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(d, f) }
