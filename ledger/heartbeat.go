package ledger

import (
	"context"
	"sync"

	"github.com/idemkit/idemkit/internal/clock"
)

// run calls fn for the attempt rec (just written with its fire mark) while a
// heartbeat renews rec's lease every Config.Heartbeat. The heartbeat is
// stopped, and its last renewal finished or abandoned, before run returns,
// also when fn panics, so it never races the outcome write.
func (l *Ledger) run(ctx context.Context, rec *Record, fn effectFunc) (produced, error) {
	call := Call{EffectID: rec.EffectID, ProviderKey: rec.ProviderKey, Attempt: rec.Attempt, Fence: rec.Fence}
	if l.cfg.Heartbeat < 0 {
		return fn(ctx, call)
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := l.heartbeat(ctx, rec, cancel)
	defer stop()
	return fn(fctx, call)
}

// heartbeat renews rec's lease at every tick with a Replace fenced on the
// owner token, attempt, state firing and rec's fencing token. A refused
// renewal means the claim was reclaimed: it calls lost(ErrLeaseLost) and
// stops. A renewal that fails with an error is retried at the next tick.
// The returned stop function ends the heartbeat (cancelling a renewal in
// flight, which is harmless: a renewal changes only the lease, the update
// time and the retention) and waits for it.
func (l *Ledger) heartbeat(ctx context.Context, rec *Record, lost context.CancelCauseFunc) (stop func()) {
	ticks, stopTicker := l.cfg.Test.Clock.NewTicker(l.cfg.Heartbeat)
	quit, done := make(chan struct{}), make(chan struct{})
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	want := Expect{Owner: rec.Owner, Attempt: rec.Attempt, State: StateFiring}
	go func() {
		defer close(done)
		defer stopTicker()
		cur := rec
		clock.EachTick(quit, ticks, func() bool {
			now := l.now()
			next := cur.Clone()
			next.LeaseUntil, next.UpdatedAt = now.Add(l.cfg.Lease), now
			next.ExpiresAt = l.extend(next.ExpiresAt, now)
			ok, _, err := l.cfg.Store.Replace(rctx, next, want, now)
			switch {
			case err != nil:
				// Transient (or stopping): try again at the next tick.
			case !ok:
				lost(ErrLeaseLost)
				return false
			default:
				cur = next
			}
			return true
		})
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(quit)
			rcancel()
			<-done
		})
	}
}
