package ledger

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// minRenewal is the time a renewal's store call is given when the tick came
// so late (a pause) that nothing is left before the renewal margin (see
// clock.RenewMargin): the renewal is still tried, for at most this long,
// and is refused if the attempt was reclaimed meanwhile (the function then
// stops with ErrLeaseLost either way); one that lands proves nobody
// reclaimed it. A second leaves a loaded store time to answer. A tick with
// any time left before the margin never gets it, however little is left
// (a short lease's ticks in time leave less than a second): its renewal
// ends clock.RenewMargin before the lease does, so the function never
// outlives the lease on a renewal's account.
const minRenewal = time.Second

// renewalBudget is how long a renewal's store call, made at now, is given
// under a lease ending at leaseEnd: until the margin before that end, or
// minRenewal for a tick that came after it.
func renewalBudget(leaseEnd, now time.Time, margin time.Duration) time.Duration {
	if d := leaseEnd.Sub(now) - margin; d > 0 {
		return d
	}
	return minRenewal
}

// run calls fn for the attempt rec (just written with its fire mark) while a
// heartbeat renews rec's lease every Config.Heartbeat. The heartbeat is
// stopped, and its last renewal finished or abandoned, before run returns,
// also when fn panics, so it never races the outcome write. gaveUp reports
// that the heartbeat cancelled fn's context because its renewals kept
// failing until the lease last written could end before the next tick (see
// heartbeat): the caller then records only a success whose value is whole,
// not a relayed stream's (see do). fenceUntil is the least time the fence
// keeps the item of rec's token (zero: unknown, or no Fencer); run returns
// it as the renewals left it (see heartbeat), and leaseEnd, the lease end
// of the last write that landed (rec's, or a renewal's), which bounds the
// outcome write (see do).
func (l *Ledger) run(ctx context.Context, rec *Record, fenceUntil time.Time, fn effectFunc) (out produced, gaveUp bool, kept, leaseEnd time.Time, err error) {
	call := Call{EffectID: rec.EffectID, ProviderKey: rec.ProviderKey, Attempt: rec.Attempt, Fence: rec.Fence}
	if l.cfg.Heartbeat < 0 {
		out, err = fn(ctx, call)
		return out, false, fenceUntil, rec.LeaseUntil, err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := l.heartbeat(ctx, rec, fenceUntil, cancel)
	defer stop()
	out, err = fn(fctx, call)
	gaveUp, kept, leaseEnd = stop()
	return out, gaveUp, kept, leaseEnd, err
}

// heartbeat renews rec's lease at every tick with a Replace fenced on the
// owner token, attempt, state firing and rec's fencing token, and tracks the
// lease end of the last write that landed (rec's, then each renewal's).
//
//   - A refused renewal means the claim was reclaimed: it calls
//     lost(ErrLeaseLost) and stops.
//   - Each renewal's store call is bounded by clock.RenewMargin before the lease
//     end last written (minRenewal for a tick that came after that), so
//     a store that stalls fails the renewal while the lease holds instead
//     of keeping fn running to or past its end.
//   - A renewal that fails with an error is retried at the next tick while
//     that tick (the tick's now + Heartbeat) comes before the lease end last
//     written, and the failed renewal did not itself last until then. Otherwise no renewal can be relied on to
//     land in time, and the effect function must not outlive its lease
//     (another executor may reclaim the attempt once it ends and fire
//     again): it calls lost(ErrLeaseLost) and stops, and stop reports
//     gaveUp. The record is left as it is, firing, for a reclaim after
//     that lease end.
//   - Under a Fencer that tells how long it keeps a token's item
//     (fenceUntil set), a renewal keeps the record no longer than that;
//     one whose lease would end after it first asks the fence to keep the
//     item Retention from now (RetainingFencer.Keep), and fails, as a renewal
//     that failed with an error, when the fence cannot.
//
// The returned stop function ends the heartbeat (cancelling a renewal in
// flight, which is harmless: a renewal changes only the lease, the update
// time and the retention), waits for it and reports whether it gave up,
// and until when the fence keeps the token's item as far as the renewals
// know (fenceUntil, or later once one asked the fence to keep it), and
// the lease end of the last write that landed (leaseEnd).
// A renewal that fails because stop cancelled it never gives up.
func (l *Ledger) heartbeat(ctx context.Context, rec *Record, fenceUntil time.Time, lost context.CancelCauseFunc) (stop func() (gaveUp bool, fenceUntil, leaseEnd time.Time)) {
	ticks, stopTicker := l.cfg.Test.Clock.NewTicker(l.cfg.Heartbeat)
	quit := make(chan struct{})
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	want := Expect{Owner: rec.Owner, Attempt: rec.Attempt, State: StateFiring}
	// One allocation shared by the heartbeat and stop: gaveUp is written by
	// the heartbeat before done is closed and read by stop after.
	hb := struct {
		once   sync.Once
		gaveUp bool
		until  time.Time
		lease  time.Time // the lease end of the last write that landed
		done   chan struct{}
	}{done: make(chan struct{}), until: fenceUntil, lease: rec.LeaseUntil}
	go func() {
		defer close(hb.done)
		defer stopTicker()
		cur := rec
		clock.EachTick(quit, ticks, func() bool {
			now := l.now()
			next := cur.Clone()
			next.LeaseUntil, next.UpdatedAt = now.Add(l.cfg.Lease), now
			next.ExpiresAt = l.extend(next.ExpiresAt, now)
			// Bounded by a margin before the end of the lease last written
			// (the time left until then on the Ledger's clock; minRenewal
			// only for a tick that came after it): a renewal that stalls
			// fails while the lease holds, and the heartbeat gives up,
			// rather than leave fn running to or past its lease end while
			// it waits on the store.
			margin := clock.RenewMargin(l.cfg.Heartbeat)
			cctx, ccancel := context.WithTimeout(rctx, renewalBudget(cur.LeaseUntil, now, margin))
			var err error
			if !hb.until.IsZero() && next.LeaseUntil.After(hb.until) {
				// The fence item would end within the lease: no renewal
				// keeps the record past it unless the fence keeps the
				// item longer.
				if err = l.keepFence(cctx, rec, next.ExpiresAt); err == nil {
					hb.until = next.ExpiresAt
				}
			}
			next.ExpiresAt = capAt(next.ExpiresAt, hb.until)
			ok := false
			if err == nil {
				var found *Record
				ok, found, err = l.cfg.Store.Replace(cctx, next, want, now)
				if !ok && err == nil && found == nil && next.Live(now) {
					// The record is gone within its retention: another
					// region's TTL deletion (RED_TEAM 549). The renewal
					// writes it again rather than cut the call.
					ok, err = l.recreate(func() (context.Context, func()) { return cctx, func() {} }, next, want, now)
				}
			}
			ccancel()
			switch {
			case err != nil:
				if rctx.Err() != nil {
					return false // stopping: fn has returned
				}
				// The next renewal comes at the next tick (now + Heartbeat)
				// or, if this one took that long, at once (l.now()).
				if end := cur.LeaseUntil.Add(-margin); now.Add(l.cfg.Heartbeat).Before(end) && l.now().Before(end) {
					return true // it may still land in time
				}
				hb.gaveUp = true
				lost(ErrLeaseLost)
				return false
			case !ok:
				lost(ErrLeaseLost)
				return false
			default:
				cur = next
				hb.lease = cur.LeaseUntil
			}
			return true
		})
	}()
	return func() (bool, time.Time, time.Time) {
		hb.once.Do(func() {
			close(quit)
			rcancel()
			<-hb.done
		})
		return hb.gaveUp, hb.until, hb.lease
	}
}
