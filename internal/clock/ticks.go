package clock

import "time"

// EachTick is the loop of a heartbeat: it calls fn at every tick of ticks
// until done is closed or fn returns false. A tick that arrives together
// with done's closing is not acted on (done wins), so no call of fn starts
// after done is closed and the tick pending then has been drained. It runs
// in the caller's goroutine and returns when the loop ends; fn is not kept
// after it returns.
func EachTick(done <-chan struct{}, ticks <-chan time.Time, fn func() (more bool)) {
	for {
		select {
		case <-done:
			return
		case <-ticks:
		}
		select {
		case <-done: // stopped while the tick was pending
			return
		default:
		}
		if !fn() {
			return
		}
	}
}

// RenewMargin is how long before the end of the lease written last a
// heartbeat's renewal must have ended, for a heartbeat of period every: a
// quarter of the period, at most a second. The holder's work is cancelled
// when that renewal fails, so the margin is what separates the
// cancellation from the moment another party may take the lease over.
// Layer 1's and the ledger's heartbeats share it.
func RenewMargin(every time.Duration) time.Duration {
	return min(every/4, time.Second)
}
