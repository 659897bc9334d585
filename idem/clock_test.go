package idem_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/ledger"
)

// One test clock drives both layers: idem.Clock and ledger.Clock have one
// shape.
var _ ledger.Clock = idem.Clock(nil)
var _ idem.Clock = ledger.Clock(nil)

// renewSignal reports each lease renewal.
type renewSignal struct {
	idem.Store
	renewed chan struct{}
}

func (s *renewSignal) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	err := s.Store.Renew(ctx, id, owner, leaseExpires, now)
	s.renewed <- struct{}{}
	return err
}

// TestGuardClockGovernsWaitsAndHeartbeat: the injected clock
// (TestConfig.Clock) paces the lease heartbeat (its ticker) and a
// duplicate's wait and poll backoff (its Sleep): with a ticker the test
// drives and a Sleep that returns at once, a tick renews the lease, and a
// duplicate of the pending request spends its whole Wait on the clock's
// Sleep, never more, and is answered 409 in flight without any real wait.
func TestGuardClockGovernsWaitsAndHeartbeat(t *testing.T) {
	var mu sync.Mutex
	var slept time.Duration
	sleeps := 0
	ticks := make(chan time.Time)
	renewed := make(chan struct{}, 4)
	const wait = 2 * time.Second
	e := newEnv(t, func(c *idem.Config) {
		c.Test.Clock = idemtest.ClockFuncs{
			NowFunc: c.Test.Clock.Now,
			SleepFunc: func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				slept += d
				sleeps++
				mu.Unlock()
				return ctx.Err()
			},
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} },
		}
		c.Wait = wait
		c.Store = &renewSignal{Store: c.Store, renewed: renewed}
	})
	started, release := make(chan struct{}), make(chan struct{})
	first := &handler{before: func(context.Context) { close(started) }, block: release}
	done := make(chan events.APIGatewayV2HTTPResponse)
	go func() { done <- e.call(first, v2event("POST", "POST /runs", testKey, `{"a":1}`)) }()
	<-started

	ticks <- time.Time{}
	<-renewed

	dup := e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	if dup.StatusCode != 409 {
		t.Fatalf("duplicate of a pending request: %d %s, want 409 in flight", dup.StatusCode, dup.Body)
	}
	mu.Lock()
	if sleeps < 2 || slept > wait || slept < wait/2 {
		t.Errorf("the duplicate slept %s in %d sleeps on the clock, want its Wait (%s) spent on it", slept, sleeps, wait)
	}
	mu.Unlock()
	close(release)
	if r := <-done; r.StatusCode != 201 {
		t.Fatalf("first request: %d", r.StatusCode)
	}
}

// TestGuardClockGovernsTheCommerceReplayWait: the wait of a sync replay on
// an Action still pending (the commerce policy) sleeps on the Guard's
// clock and is measured on it: with a Sleep that returns at once, the
// replay spends its whole Wait on the clock's Sleep, never more, and
// answers the pending Action 202 with Retry-After without any real wait.
func TestGuardClockGovernsTheCommerceReplayWait(t *testing.T) {
	var mu sync.Mutex
	var slept time.Duration
	sleeps := 0
	const wait = 2 * time.Second
	e := newEnv(t, func(c *idem.Config) {
		c.Policy, c.Wait = commerce.Policy, wait
		c.Test.Clock = idemtest.ClockFuncs{
			NowFunc: c.Test.Clock.Now,
			SleepFunc: func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				slept += d
				sleeps++
				mu.Unlock()
				return ctx.Err()
			},
		}
	})
	a := &action{status: "pending"}
	var runs atomic.Int32
	if r, _ := doAction(t, e, a, "", &runs); r.StatusCode != 201 {
		t.Fatalf("first: %d %s", r.StatusCode, r.Body)
	}
	r, m := doAction(t, e, a, "sync", &runs)
	if r.StatusCode != 202 || m["status"] != "pending" || r.Headers["Retry-After"] == "" {
		t.Fatalf("sync replay of a pending action past its Wait: %d %v %v, want 202 pending with Retry-After", r.StatusCode, r.Headers, m)
	}
	mu.Lock()
	defer mu.Unlock()
	if sleeps < 2 || slept > wait || slept < wait/2 {
		t.Errorf("the replay slept %s in %d sleeps on the clock, want its Wait (%s) spent on it", slept, sleeps, wait)
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs, want 1", runs.Load())
	}
}
