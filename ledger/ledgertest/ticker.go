package ledgertest

import (
	"sync/atomic"
	"time"
)

// Ticker is a manual heartbeat ticker for a ledger.Clock (ClockFuncs.NewTickerFunc): it ticks
// only when told to, so heartbeat tests need no sleeps. Every heartbeat
// started with it shares its one unbuffered channel.
type Ticker struct {
	ch      chan time.Time
	started atomic.Int64
	stopped atomic.Int64
}

// NewTicker returns a Ticker.
func NewTicker() *Ticker { return &Ticker{ch: make(chan time.Time)} }

// New starts a heartbeat ticker on the shared channel (a ClockFuncs.NewTickerFunc).
func (t *Ticker) New(time.Duration) (<-chan time.Time, func()) {
	t.started.Add(1)
	var once atomic.Bool
	return t.ch, func() {
		if once.CompareAndSwap(false, true) {
			t.stopped.Add(1)
		}
	}
}

// Tick delivers one tick; it blocks until a heartbeat receives it.
func (t *Ticker) Tick() { t.ch <- time.Time{} }

// TryTick delivers a tick only if a heartbeat is waiting for one right now,
// and reports whether it did.
func (t *Ticker) TryTick() bool {
	select {
	case t.ch <- time.Time{}:
		return true
	default:
		return false
	}
}

// Started and Stopped count heartbeats started and stopped.
func (t *Ticker) Started() int { return int(t.started.Load()) }

// Stopped counts heartbeats stopped (see Started).
func (t *Ticker) Stopped() int { return int(t.stopped.Load()) }
