package idem

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// timerClock is a Clock that can also run a function after a pause (the
// system clock, and idemtest.ClockFuncs without a NewTickerFunc): the
// heartbeat then runs on one timer, armed when the handler starts and
// re-armed after each renewal, instead of a ticker and a goroutine started
// up front; the renewals are the same. AfterFunc returns nil when the
// clock's ticker must pace the heartbeat (a test's ticker).
type timerClock interface {
	AfterFunc(d time.Duration, f func()) *time.Timer
}

// heartbeat renews the lease every Heartbeat (on the Guard's clock) while
// the handler runs, and cancels the handler's context with ErrLeaseLost
// when a renewal is fenced, or when one fails (the store unavailable,
// throttled, timed out) and the next could no longer come before the end
// of the last lease written: the handler's context never outlives its
// lease, so a same-key retry that reclaims the record after that end
// never runs beside a handler whose context is still live. It lives in the request's execution (one per
// claimed request), as does the handler's cancellable context (leaseCtx,
// made only when the handler needs it): on a timerClock starting it allocates only one timer and its
// callback; on another clock, the clock's ticker and a goroutine.
type heartbeat struct {
	t     *txn
	ctx   *claimValues // the handler's context without the lease's cancellation
	lease *leaseCtx    // the handler's context
	every time.Duration
	// until is the end of the last lease written (the claim's, then each
	// renewal's that succeeded), on the Guard's clock: the time from
	// which a same-key request may reclaim the record.
	until time.Time
	// ends is the record's retention end (zero: none), on the Guard's
	// clock: from then on every claim takes the record for absent, so no
	// renewal extends the lease past it.
	ends time.Time

	// On a timerClock: mu is held through each renewal, so that stop
	// waits for a renewal under way; after stop none starts.
	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
	due     time.Time // when the renewal the timer is armed for is due (wall time)

	// On another clock: the ticker's goroutine.
	done   chan struct{}  // closed by stop
	exited sync.WaitGroup // done when the renewing goroutine returns
}

// startHeartbeat starts the heartbeat of the handler whose context
// without the lease is ctx and whose claim wrote the lease end until (on
// the Guard's clock), and returns the handler's context (cancelled
// with ErrLeaseLost when the lease is lost, and when the heartbeat stops)
// and the heartbeat to stop when the handler returns.
func (t *txn) startHeartbeat(ctx *claimValues, until, ends time.Time) (context.Context, *heartbeat) {
	x := t.x
	x.lease = leaseCtx{parent: ctx}
	hctx := &x.lease
	hb := &x.hb // allocated with the execution
	*hb = heartbeat{t: t, ctx: ctx, lease: hctx, every: t.g.cfg.Heartbeat, until: until, ends: ends}
	if tc, ok := t.g.clock.(timerClock); ok {
		hb.mu.Lock()
		defer hb.mu.Unlock()
		hb.due = clock.Wall().Add(hb.every)
		if hb.timer = tc.AfterFunc(hb.every, hb.beat); hb.timer != nil {
			return hctx, hb
		}
	}
	hb.done = make(chan struct{})
	ticks, stopTicks := t.g.clock.NewTicker(hb.every)
	hb.exited.Add(1)
	go func() {
		defer hb.exited.Done()
		defer stopTicks()
		clock.EachTick(hb.done, ticks, hb.renew)
	}()
	return hctx, hb
}

// beat is one tick of the timer: it renews the lease and re-arms the
// timer for the next tick, as a time.Ticker of period every started with
// the heartbeat would deliver it: at the next multiple of the period, or at
// once when the renewal outlasted it (the ticks it outlasted beyond that one
// are dropped).
func (hb *heartbeat) beat() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.stopped || !hb.renew() {
		return
	}
	var wait time.Duration
	hb.due, wait = nextTick(hb.due, clock.Wall(), hb.every)
	hb.timer.Reset(wait)
}

// nextTick returns, for a ticker of period every whose last tick was due
// at due and delivered up to now, when its next tick is due and how long
// from now it is delivered: at due+every, or at once (wait 0) when now is
// past that, the tick then counted as due at the last multiple of every
// not after now (the ticks in between are dropped, as a time.Ticker drops
// them for a slow reader).
func nextTick(due, now time.Time, every time.Duration) (time.Time, time.Duration) {
	due = due.Add(every)
	late := now.Sub(due)
	if late < 0 {
		return due, -late
	}
	return due.Add(late / every * every), 0
}

// renew renews the lease once; false when the lease was lost or cut: the
// handler's context is then cancelled with ErrLeaseLost, and no renewal
// follows. The lease is lost when the renewal is fenced, and cut when the
// renewal failed otherwise and the next one, Heartbeat from now, would
// come at or after the end of the last lease written (hb.until): a
// renewal that can no longer land in time must not leave the handler
// running past its lease. A failed renewal with time left before that end
// is retried at the next tick. No renewal extends the lease past the
// record's retention end (hb.ends), and once the lease reaches it the
// lease is cut as soon as the next renewal would come at or after it: a
// record past its retention is claimed afresh by a same-key request.
func (hb *heartbeat) renew() bool {
	t := hb.t
	now := t.g.clock.Now()
	lease, _ := t.g.leaseFor(hb.ctx) // inside Lambda, capped by what is left of the invocation
	if !hb.ends.IsZero() && now.Add(lease).After(hb.ends) {
		if !now.Add(hb.every).Before(hb.ends) {
			// The record's retention ends before the next renewal could.
			hb.lease.end(ErrLeaseLost)
			return false
		}
		lease = hb.ends.Sub(now)
	}
	started := t.g.wallAt(now)
	// Off the request's goroutine: its own context, bounded by a margin
	// before the end of the lease written last (wall time), so that a
	// renewal that stalls fails, and the lease is cut, while that lease
	// still holds. A tick that came late (a pause) still gets the least
	// store call's time (storeCtxAt): a renewal that lands proves nobody
	// reclaimed the record.
	rctx := t.g.storeCtxAt(nil, hb.ctx, true, t.x.leaseEnd.Add(-clock.RenewMargin(hb.every)), started)
	err := t.g.cfg.Store.Renew(rctx, t.id, t.owner, now.Add(lease), now)
	rctx.release()
	if err == nil {
		t.x.leaseEnd = started.Add(lease)
		hb.until = now.Add(lease)
		return true
	}
	t.writeFailed(hb.ctx, "renew", err)
	if errors.Is(err, ErrFenced) || !t.g.clock.Now().Add(hb.every).Before(hb.until) {
		hb.lease.end(ErrLeaseLost)
		return false
	}
	return true
}

// lost reports whether the handler's context ended with ErrLeaseLost (a
// fenced renewal, or the lease cut). Read after stop.
func (hb *heartbeat) lost() bool {
	hb.lease.mu.Lock()
	defer hb.lease.mu.Unlock()
	return hb.lease.cause == ErrLeaseLost
}

// stop ends the renewals; a renewal under way finishes first, so none
// starts after stop returns.
func (hb *heartbeat) stop() {
	if hb.done == nil {
		hb.mu.Lock()
		hb.stopped = true
		hb.timer.Stop()
		hb.mu.Unlock()
	} else {
		close(hb.done)
		hb.exited.Wait()
	}
	hb.lease.end(nil)
}
