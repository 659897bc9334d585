package ledgertest

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// Clock is a manual ledger.Clock: Now moves only when told to. Its Sleep and
// NewTicker are the system clock's (use ClockFuncs and Ticker for manual
// ones).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t (never backwards).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// Sleep pauses for d in real time, or until ctx ends.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, d) }

// NewTicker starts a real ticker of period d.
func (c *Clock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	return clock.System{}.NewTicker(d)
}

// ClockFuncs is a ledger.Clock (and an idem.Clock: the two have one
// shape) made of functions, for a test that replaces one part of the
// clock: a nil field is the system clock's (time.Now, a real sleep
// honouring ctx, a time.Ticker). Its fields are NowFunc, SleepFunc and
// NewTickerFunc.
type ClockFuncs = clock.Funcs
