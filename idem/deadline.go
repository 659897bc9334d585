package idem

import (
	"context"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// minStoreCall is the least time a store call is given even when the
// request's deadline (less WaitMargin) or the lease has already passed: a
// completion after a handler that used up the request's time is still
// tried, briefly, rather than failed unsent.
const minStoreCall = 100 * time.Millisecond

// storeCtx returns the context of one store call made for the request
// whose context is ctx, and its cancel function. The call keeps ctx's
// values; detach drops ctx's cancellation (a completion, release or delete
// must not be lost to a client that hung up) but never the bound. The
// call's deadline is the earliest of
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
func (g *Guard) storeCtx(ctx context.Context, detach bool, limit time.Time) (context.Context, context.CancelFunc) {
	now := clock.Wall()
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
	if detach {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithDeadline(ctx, dl)
}
