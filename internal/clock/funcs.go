package clock

import (
	"context"
	"time"
)

// Funcs is a clock made of functions (Now, Sleep, NewTicker: the shape of
// ledger.Clock and idem.Clock), for a test that replaces one part of the
// clock: a nil field is the system clock's (time.Now, a real sleep
// honouring ctx, a time.Ticker). ledgertest.ClockFuncs and
// idemtest.ClockFuncs are this type.
type Funcs struct {
	NowFunc       func() time.Time
	SleepFunc     func(ctx context.Context, d time.Duration) error
	NewTickerFunc func(d time.Duration) (ticks <-chan time.Time, stop func())
}

// Now calls NowFunc, or time.Now.
func (f Funcs) Now() time.Time {
	if f.NowFunc != nil {
		return f.NowFunc()
	}
	return time.Now()
}

// Sleep calls SleepFunc, or sleeps for real.
func (f Funcs) Sleep(ctx context.Context, d time.Duration) error {
	if f.SleepFunc != nil {
		return f.SleepFunc(ctx, d)
	}
	return Sleep(ctx, d)
}

// NewTicker calls NewTickerFunc, or starts a time.Ticker.
func (f Funcs) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	if f.NewTickerFunc != nil {
		return f.NewTickerFunc(d)
	}
	return System{}.NewTicker(d)
}

// AfterFunc is the system clock's (time.AfterFunc) when NewTickerFunc is
// nil, else nil: the test's ticker paces what the caller would have timed.
func (f Funcs) AfterFunc(d time.Duration, fn func()) *time.Timer {
	if f.NewTickerFunc != nil {
		return nil
	}
	return System{}.AfterFunc(d, fn)
}
