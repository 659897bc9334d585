package idem

import (
	"context"
	"sync"
	"time"
)

// claimValues is the handler's context without the lease's cancellation:
// the request's context with the claim (FromContext, Transact) and the
// decoded request (Decoded) as values, as context.WithValue would carry
// them. It lives in the txn, so it allocates nothing.
type claimValues struct {
	context.Context
	claim   *claimState
	decoded any // nil: none
}

// Value implements context.Context.
func (c *claimValues) Value(key any) any {
	switch key.(type) {
	case claimKey:
		return c.claim
	case decodedKey:
		if c.decoded != nil {
			return c.decoded
		}
	}
	return c.Context.Value(key)
}

// leaseCtx is the handler's context while a heartbeat renews its lease:
// parent (its claimValues) cancelled with ErrLeaseLost when a renewal is
// fenced or the lease is cut (heartbeat), and with context.Canceled when
// the handler has returned. It is
// the context context.WithCancelCause(parent) returns, made only when
// first needed: a handler that reads Done, a value other than the claim's,
// or Err once the context has ended, gets that context's channel, values,
// error and cause from then on; a handler that reads none starts nothing
// and allocates nothing. It lives in the txn.
type leaseCtx struct {
	parent *claimValues

	mu     sync.Mutex
	real   context.Context         // context.WithCancelCause(parent), once made
	cancel context.CancelCauseFunc // real's
	ended  bool                    // end was called
	cause  error                   // end's cause
}

// made returns the context.WithCancelCause context, making it on first
// use (ended at once with end's cause when end came first).
func (c *leaseCtx) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real == nil {
		c.real, c.cancel = context.WithCancelCause(c.parent)
		if c.ended {
			c.cancel(c.cause)
		}
	}
	return c.real
}

// end cancels the context with cause (nil: context.Canceled), unless it
// ended before.
func (c *leaseCtx) end(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	c.ended, c.cause = true, cause
	if c.cancel != nil {
		c.cancel(cause)
	}
}

// Deadline implements context.Context.
func (c *leaseCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Done implements context.Context.
func (c *leaseCtx) Done() <-chan struct{} { return c.made().Done() }

// Err implements context.Context.
func (c *leaseCtx) Err() error {
	c.mu.Lock()
	real, ended := c.real, c.ended
	c.mu.Unlock()
	if real != nil {
		return real.Err()
	}
	if !ended && c.parent.Err() == nil {
		return nil
	}
	return c.made().Err()
}

// Value implements context.Context: the claim's values from parent; any
// other from the context.WithCancelCause context (so that what the context
// package finds through Value, the cause of context.Cause and the parent
// of a derived context, is that context's).
func (c *leaseCtx) Value(key any) any {
	switch key.(type) {
	case claimKey, decodedKey:
		return c.parent.Value(key)
	}
	return c.made().Value(key)
}
