package clock

import (
	"context"
	"sync"
	"time"
)

// Manual is a clock for tests whose time moves only when told to
// (Advance, Set). Its Sleep and NewTicker are the system clock's (a real
// sleep honouring ctx, a time.Ticker); SleepAdvances gives one whose
// Sleep moves the time instead. ledgertest.Clock is this type. Safe for
// concurrent use.
type Manual struct {
	mu sync.Mutex
	t  time.Time
}

// NewManual returns a Manual clock at t.
func NewManual(t time.Time) *Manual { return &Manual{t: t} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}

// Advance moves the clock by d.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.t = m.t.Add(d)
}

// Set moves the clock to t (never backwards).
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.After(m.t) {
		m.t = t
	}
}

// Sleep pauses for d in real time, or until ctx ends.
func (m *Manual) Sleep(ctx context.Context, d time.Duration) error { return Sleep(ctx, d) }

// NewTicker starts a real ticker of period d.
func (m *Manual) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	return System{}.NewTicker(d)
}

// SleepAdvances returns a clock whose Now is m's and whose Sleep moves m
// on by d at once instead of sleeping (or returns ctx's error when ctx is
// done), so that a wait on it (a duplicate's polls, a retry's backoff)
// never sleeps for real; its ticker is the system's.
func (m *Manual) SleepAdvances() Funcs {
	return Funcs{NowFunc: m.Now, SleepFunc: func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.Advance(d)
		return nil
	}}
}
