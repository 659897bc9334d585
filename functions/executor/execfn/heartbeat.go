package execfn

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	sysclock "github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// runHeartbeat renews an execution's claim on its run (RunStore.Renew
// under the run's claim epoch) every Executor.Heartbeat while the run's
// nodes execute, like Layer 1's lease heartbeat: the run's last progress
// stays within StaleAfter, so the stale-run pass never takes it from a
// live executor. A renewal refused because another execution took the run
// (or it ended) cancels the execution's context and marks the claim lost;
// a renewal that fails otherwise is logged and the next tick tries again.
type runHeartbeat struct {
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the renewing goroutine returns
	cancel context.CancelFunc
	lost   atomic.Bool
}

// heartbeatEvery returns the renewal interval: Heartbeat, default
// StaleAfter/3 (DefaultStaleAfter/3 when StaleAfter is unset).
func (x *Executor) heartbeatEvery() time.Duration {
	if x.Heartbeat > 0 {
		return x.Heartbeat
	}
	after := x.StaleAfter
	if after <= 0 {
		after = DefaultStaleAfter
	}
	return max(after/3, time.Millisecond)
}

// startHeartbeat starts renewing run's claim and returns the context the
// execution runs under (cancelled when the claim is lost; an effect call
// made under it runs under effectContext instead).
func (x *Executor) startHeartbeat(ctx context.Context, run runs.Run) (context.Context, *runHeartbeat) {
	hctx, cancel := context.WithCancel(context.WithValue(ctx, executionKey{}, ctx))
	hb := &runHeartbeat{done: make(chan struct{}), exited: make(chan struct{}), cancel: cancel}
	ticks, stopTicks := x.clock().NewTicker(x.heartbeatEvery())
	go func() {
		defer close(hb.exited)
		defer stopTicks()
		sysclock.EachTick(hb.done, ticks, func() bool {
			_, err := x.Runs.Renew(hctx, run.ID, run.Epoch, x.now())
			switch {
			case errors.Is(err, runs.ErrStatusConflict), errors.Is(err, runs.ErrRunNotFound):
				hb.lost.Store(true)
				cancel()
				return false
			case err != nil && hctx.Err() == nil:
				x.log().WarnContext(ctx, "executor: run claim renewal failed", slog.String("run_id", run.ID), keyhash.ErrAttr(err))
			}
			return true
		})
	}()
	return hctx, hb
}

// stop ends the renewals (a renewal under way is cancelled, so a stalled
// store never holds the execution here, and none starts after stop
// returns) and reports whether the claim was lost.
func (hb *runHeartbeat) stop() (lost bool) {
	close(hb.done)
	hb.cancel()
	<-hb.exited
	return hb.lost.Load()
}

// executionKey carries, on the context of an execution under a claim
// (startHeartbeat), the execution's own context: the one the claim's loss
// does not cancel.
type executionKey struct{}

// effectContext returns the context an effect call (a webhook delivery
// through the ledger) of the execution under ctx runs under: ctx's values,
// ended by the execution's own end (its invocation's deadline, the
// executor stopped) but not by the loss of the run's claim. An execution
// overtaken (another took the run: a duplicate delivery, the stale-run
// pass) or whose run was cancelled stops driving the run, but a request it
// has already sent is left to finish and its outcome recorded: cut, the
// attempt would be escaped and the request sent again by the next
// execution, twice at a receiver that does not deduplicate. No later node
// starts: the walk still runs under ctx, whose appends are refused. Nor
// is anything sent that was not sent yet once the claim's loss is known:
// ectx carries ctx as the claim (runs.WithClaim), so the effect seams
// refuse a send not yet made (RED_TEAM 550). Call stop once the call
// returns.
func effectContext(ctx context.Context) (ectx context.Context, stop func()) {
	own, ok := ctx.Value(executionKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ectx = runs.WithClaim(context.WithoutCancel(ctx), ctx)
	endDeadline := func() {}
	if dl, ok := own.Deadline(); ok {
		ectx, endDeadline = context.WithDeadline(ectx, dl)
	}
	ectx, cancel := context.WithCancelCause(ectx)
	unhook := context.AfterFunc(own, func() { cancel(context.Cause(own)) })
	if own.Err() != nil {
		cancel(context.Cause(own)) // ended already: at once, not when AfterFunc's goroutine runs
	}
	return ectx, func() {
		unhook()
		cancel(nil)
		endDeadline()
	}
}
