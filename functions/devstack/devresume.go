package devstack

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idemkit/functions/executor/execfn"
)

// devIdleResume is the longest `idemkit dev` goes without a ResumeDue pass,
// and devResumeRetry how soon it passes again after a pass that failed or
// found a full batch.
const (
	devIdleResume  = 30 * time.Second
	devResumeRetry = time.Second
)

// devResumePass is one pass of `idemkit dev`'s resumer: the parked runs
// that are due (ResumeDue), then the live runs without progress past the
// executor's StaleAfter (ResumeStale). It reports how many runs both
// executed and the first error.
func devResumePass(x *execfn.Executor) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		n, err := x.ResumeDue(ctx)
		m, serr := x.ResumeStale(ctx)
		if err == nil {
			err = serr
		}
		return n + m, err
	}
}

// resumer drives the executor's ResumeDue (parked runs whose wake time has
// come) in `idemkit dev`, as the deployed function's minute schedule does,
// without a query every second: it passes at start-up, at the wake time of
// every run its executor parks (parked, from execfn.Executor.Parked), a
// second after a pass that failed (a due run that stays parked) or
// resumed a full batch (more may be due), and at least every idle
// otherwise, which finds runs parked by another process on the same tables
// or by an earlier dev whose wake time was still ahead at start-up. A run
// parked here is therefore resumed at its wake time, not up to a tick
// later; the schedule stays the run record's (nothing is lost if a
// notice is).
type resumer struct {
	// resume is one pass: how many due runs it executed, and the first
	// error (execfn.Executor.ResumeDue).
	resume func(ctx context.Context) (int, error)
	// full is a pass's batch size (execfn.DefaultResumeBatch).
	full int
	// idle and retry: devIdleResume and devResumeRetry unless set.
	idle, retry time.Duration
	// resumed, when set, is called after a pass that executed runs (their
	// writes feed the effects and idempotency streams).
	resumed func()

	mu sync.Mutex
	// wakes are the wake times reported since the last pass began, and
	// those reported before it that were still ahead of it.
	wakes []time.Time
	kick  chan struct{}
}

func newResumer(resume func(context.Context) (int, error), full int) *resumer {
	return &resumer{resume: resume, full: full, idle: devIdleResume, retry: devResumeRetry, kick: make(chan struct{}, 1)}
}

// parked notes a run parked until at (execfn.Executor.Parked). It never
// blocks.
func (r *resumer) parked(at time.Time) {
	r.mu.Lock()
	r.wakes = append(r.wakes, at)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// run passes until ctx ends.
func (r *resumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		// A wake time noted before the pass began was written before it
		// too (the executor reports a park once its Schedule succeeded),
		// so the pass's Due query, taken at or after began, lists the run
		// if it is due by then.
		began := time.Now()
		r.mu.Lock()
		seen := len(r.wakes)
		r.mu.Unlock()
		n, err := r.resume(ctx)
		if ctx.Err() != nil {
			return
		}
		if n > 0 && r.resumed != nil {
			r.resumed()
		}
		next := began.Add(r.idle)
		if err != nil || n >= r.full {
			next = began.Add(r.retry)
		}
		r.mu.Lock()
		kept := r.wakes[:0]
		for i, w := range r.wakes {
			if i >= seen || w.After(began) {
				kept = append(kept, w)
			}
		}
		r.wakes = kept
		r.mu.Unlock()
		if !r.wait(ctx, next) {
			return
		}
	}
}

// wait returns at the earlier of next and the first noted wake time, and
// reports whether ctx is still live; a wake time noted meanwhile shortens
// the wait.
func (r *resumer) wait(ctx context.Context, next time.Time) bool {
	for {
		until := next
		r.mu.Lock()
		for _, w := range r.wakes {
			if w.Before(until) {
				until = w
			}
		}
		r.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			return ctx.Err() == nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
			return true
		case <-r.kick:
			t.Stop()
		}
	}
}
