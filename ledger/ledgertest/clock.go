package ledgertest

import (
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

// Clock is a manual ledger.Clock (and idem.Clock): Now moves only when
// told to (Advance; Set, never backwards). Its Sleep and NewTicker are the
// system clock's (use ClockFuncs and Ticker for manual ones).
type Clock = clock.Manual

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return clock.NewManual(t) }

// ClockFuncs is a ledger.Clock (and an idem.Clock: the two have one
// shape) made of functions, for a test that replaces one part of the
// clock: a nil field is the system clock's (time.Now, a real sleep
// honouring ctx, a time.Ticker). Its fields are NowFunc, SleepFunc and
// NewTickerFunc.
type ClockFuncs = clock.Funcs
