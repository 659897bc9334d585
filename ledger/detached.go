package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// detached returns the context of a write made on an attempt's behalf
// whatever the caller's context (see Config.OutcomeTimeout): ctx's values,
// not its cancellation nor its deadline, and a deadline of its own,
// OutcomeTimeout from now. The caller calls its release when the write
// returns.
func (l *Ledger) detached(ctx context.Context) *detachedCtx {
	return &detachedCtx{parent: ctx, deadline: clock.Wall().Add(l.cfg.OutcomeTimeout)}
}

// detachedCtx is the context of one detached write (Ledger.detached): the
// context context.WithDeadline(context.WithoutCancel(parent), deadline)
// returns, made only when first needed. A store that reads Done or Value
// (an SDK), or Err once the write ended (its deadline passed, or release
// called), gets that context's channel, values and error from then on; a
// store that reads only Err and Deadline while the write is live (the
// memory store) starts no timer. The same idea as the Layer-1 Guard's
// store calls. A detachedCtx serves one write.
type detachedCtx struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	real     context.Context    // the context.WithDeadline context, once made
	stop     context.CancelFunc // real's cancel
	released bool               // release was called
}

// made returns the context.WithDeadline context, making it on first use
// (cancelled at once when the write was already released).
func (c *detachedCtx) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.stop = context.WithDeadline(context.WithoutCancel(c.parent), c.deadline)
		if c.released {
			c.stop()
		}
	}
	return c.real
}

// Deadline implements context.Context.
func (c *detachedCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context.
func (c *detachedCtx) Done() <-chan struct{} { return c.made().Done() }

// Err implements context.Context: nil while the write is live, else the
// error of the context.WithDeadline context.
func (c *detachedCtx) Err() error {
	c.mu.Lock()
	real, released := c.real, c.released
	c.mu.Unlock()
	if real != nil {
		return real.Err()
	}
	if !released && clock.Before(c.deadline) {
		return nil
	}
	return c.made().Err()
}

// Value implements context.Context. It makes the context.WithDeadline
// context, so that what the context package finds through Value (the
// parent of a derived context) is that context's.
func (c *detachedCtx) Value(key any) any { return c.made().Value(key) }

// release ends the write: the context is cancelled (context.Canceled)
// unless it ended before.
func (c *detachedCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.stop != nil {
		c.stop()
	}
}

// claimCall returns the context of a claim's or reclaim's store call made
// for ctx, and the function that ends it once the call returned: ctx's
// values, not its cancellation nor its deadline. A claim whose caller
// went away while it was on the way (cancelled, or its deadline passed)
// then waits for its own answer, and Do gives it back after it landed,
// never before it, where the give-back would find nothing of its own to
// release and the claim, landing after it, would hold the effect in
// flight for its whole lease, its attempt (the fire mark, without a
// Fencer) then reported escaped although its function was never called
// (RED_TEAM 534; by a deadline, 560). Once the caller went away the call
// gets at most Config.OutcomeTimeout more, so a store that hangs does not
// hold Do without bound. A context that cannot be cancelled is used as it
// is (no allocation).
func (l *Ledger) claimCall(ctx context.Context) (context.Context, func()) {
	if ctx.Done() == nil {
		return ctx, nop
	}
	c, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var bound *time.Timer
	ended := false
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			bound = time.AfterFunc(l.cfg.OutcomeTimeout, cancel)
		}
	})
	return c, func() {
		stop()
		mu.Lock()
		ended = true
		if bound != nil {
			bound.Stop()
		}
		mu.Unlock()
		cancel()
	}
}

func nop() {}
