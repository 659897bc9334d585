package idem

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// minStoreCall is the least time a store call is given even when the
// request's deadline (less WaitMargin) or the lease has already passed: a
// completion after a handler that used up the request's time is still
// tried, briefly, rather than failed unsent.
const minStoreCall = 100 * time.Millisecond

// storeCtx returns the context of one store call made for the request
// whose context is ctx, written into c (nil: a new one); the caller calls
// its release when the call returns. The call keeps ctx's values; detach
// drops ctx's cancellation (a completion, release or delete must not be
// lost to a client that hung up) but never the bound. The call's deadline
// is the earliest of
//
//   - now + Config.StoreTimeout,
//   - ctx's deadline less Config.WaitMargin, so that the answer can still
//     be written before the request's own deadline,
//   - limit, when not zero (the claim's lease end for the writes after
//     the claim, the end of a duplicate's wait for its polls),
//
// and never sooner than minStoreCall from now. A store that does not answer
// by then makes the call fail with context.DeadlineExceeded, which the
// Guard answers 503 CodeStoreUnavailable with Retry-After.
func (g *Guard) storeCtx(c *callCtx, ctx context.Context, detach bool, limit time.Time) *callCtx {
	return g.storeCtxAt(c, ctx, detach, limit, clock.Wall())
}

// storeCtxAt is storeCtx with the wall time now read by the caller (the
// same reading as the record's time when the Guard's clock is the
// system clock: Guard.wallAt).
func (g *Guard) storeCtxAt(c *callCtx, ctx context.Context, detach bool, limit, now time.Time) *callCtx {
	dl := now.Add(g.cfg.StoreTimeout)
	if d, ok := ctx.Deadline(); ok {
		if d = d.Add(-g.cfg.WaitMargin); d.Before(dl) {
			dl = d
		}
	}
	if !limit.IsZero() && limit.Before(dl) {
		dl = limit
	}
	if floor := now.Add(minStoreCall); dl.Before(floor) {
		dl = floor
	}
	if c == nil {
		c = new(callCtx)
	}
	*c = callCtx{parent: ctx, detach: detach, deadline: dl}
	return c
}

// callCtx is the context of one store call (Guard.storeCtx): ctx's values
// and (unless detached) cancellation, with the call's deadline. It is the
// context context.WithDeadline(parent, deadline) returns (parent
// context.WithoutCancel(ctx) when detached), made only when first needed:
// a store that reads Done or Value, or Err once the call has ended (the
// deadline passed, the parent cancelled, or release called), gets that
// context's channel, values, error and cause from then on. A call that
// reads only Err and Deadline while it is live (the in-memory store)
// starts no timer and allocates nothing. A callCtx serves one call.
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	real     context.Context    // the context.WithDeadline context, once made
	stop     context.CancelFunc // real's cancel
	detach   bool
	released bool // release was called
}

// made returns the context.WithDeadline context, making it on first use
// (cancelled at once when the call was already released).
func (c *callCtx) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		p := c.parent
		if c.detach {
			p = context.WithoutCancel(p)
		}
		c.real, c.stop = context.WithDeadline(p, c.deadline)
		if c.released {
			c.stop()
		}
	}
	return c.real
}

// current returns the context.WithDeadline context when made, else nil
// with whether release was called.
func (c *callCtx) current() (context.Context, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real, c.released
}

// Deadline implements context.Context.
func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context.
func (c *callCtx) Done() <-chan struct{} { return c.made().Done() }

// Err implements context.Context: nil while the call is live, else the
// error of the context.WithDeadline context.
func (c *callCtx) Err() error {
	real, released := c.current()
	if real != nil {
		return real.Err()
	}
	if !released && (c.detach || c.parent.Err() == nil) && clock.Before(c.deadline) {
		return nil
	}
	return c.made().Err()
}

// Value implements context.Context. It makes the context.WithDeadline
// context, so that what the context package finds through Value (the
// cause of context.Cause, the parent of a derived context) is that
// context's.
func (c *callCtx) Value(key any) any { return c.made().Value(key) }

// release ends the call: the context is cancelled (context.Canceled) unless
// it ended before.
func (c *callCtx) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = true
	if c.stop != nil {
		c.stop()
	}
}
