package idemtest

import "github.com/idemkit/idemkit/internal/clock"

// ClockFuncs is an idem.Clock made of functions, for a test that replaces
// one part of the clock (idem.TestConfig.Clock): a nil field is the
// system clock's (time.Now, a real sleep honouring ctx, a time.Ticker).
// Its fields are NowFunc, SleepFunc and NewTickerFunc. It is
// ledgertest.ClockFuncs: the two layers' clocks have one shape.
type ClockFuncs = clock.Funcs
