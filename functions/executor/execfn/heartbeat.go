package execfn

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	sysclock "github.com/idemkit/idemkit/internal/clock"
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
// execution runs under (cancelled when the claim is lost).
func (x *Executor) startHeartbeat(ctx context.Context, run runs.Run) (context.Context, *runHeartbeat) {
	hctx, cancel := context.WithCancel(ctx)
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
				x.log().WarnContext(ctx, "executor: run claim renewal failed", slog.String("run_id", run.ID), slog.String("error", err.Error()))
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
