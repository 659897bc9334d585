package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestLeaseNeverOutlivesTheRecord: a record's retention end is where
// every reader and claim takes it for absent (and TTL or the sweeper
// deletes it), so a handler whose heartbeat kept renewing past that end
// would run beside a same-key request that claimed the key afresh. The
// heartbeat never renews the lease past the record's retention end, and
// when the next renewal could not come before it, the handler's context
// ends with cause ErrLeaseLost: the same-key request that claims the key
// after that end runs only once the first handler's context has ended.
// Here under the ERP policy with a 10-minute retention, a 5-minute lease
// and a 1-minute heartbeat, the first handler running on.
func TestLeaseNeverOutlivesTheRecord(t *testing.T) {
	const retention, lease, every = 10 * time.Minute, 5 * time.Minute, time.Minute
	ticks := make(chan time.Time)
	var s *failingRenewals
	e := newEnv(t, func(c *idem.Config) {
		c.Policy, c.Retention, c.Lease, c.Heartbeat = erp.Policy, retention, lease, every
		s = &failingRenewals{Store: c.Store, failFrom: 1 << 30} // renewals never fail
		c.Store = s
		c.Test.Clock = idemtest.ClockFuncs{NowFunc: c.Test.Clock.Now,
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
	})
	s.took = func() { e.clock.Advance(every) } // on the heartbeat's goroutine
	start := e.clock.Now()
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	var firstCtx context.Context
	second := &handler{body: `{"who":"second"}`, before: func(context.Context) {
		if firstCtx.Err() == nil {
			t.Errorf("a same-key request ran at %s, after the record's retention ended (%s), while the first handler's context was live",
				e.clock.Now().Sub(start), retention)
		}
	}}
	var secondStatus int
	first := &handler{body: `{"who":"first"}`, before: func(ctx context.Context) {
		firstCtx = ctx
		e.clock.Advance(every)
		cut := tickUntilCut(ctx, ticks, 30)
		if !cut {
			t.Errorf("handler context still live at %s, past the record's retention (%s)", e.clock.Now().Sub(start), retention)
		} else if cause := context.Cause(ctx); !errors.Is(cause, idem.ErrLeaseLost) {
			t.Errorf("cause %v, want ErrLeaseLost", cause)
		} else if e.clock.Now().Sub(start) > retention {
			t.Errorf("cut at %s, after the record's retention ended (%s)", e.clock.Now().Sub(start), retention)
		}
		if end := start.Add(retention); e.clock.Now().Before(end) {
			e.clock.Set(end)
		}
		secondStatus = e.call(second, ev).StatusCode
	}}
	r := e.call(first, ev)
	if second.Calls() != 1 || secondStatus != 201 {
		t.Fatalf("second request: %d calls, status %d; want one run after the retention ended", second.Calls(), secondStatus)
	}
	t.Logf("first answered %d", r.StatusCode)
}

// A retention shorter than the lease would end a record while its claim's
// lease is live: refused.
func TestRetentionBelowLeaseRefused(t *testing.T) {
	_, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("svc"), Policy: erp.Policy,
		Retention: 10 * time.Minute, Lease: 30 * time.Minute})
	if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "Retention 10m0s is below Lease 30m0s") {
		t.Fatalf("idem.New = %v, want the retention below the lease refused", err)
	}
	for _, r := range []time.Duration{30 * time.Minute, idem.Forever} {
		if _, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("svc"), Policy: erp.Policy,
			Retention: r, Lease: 30 * time.Minute}); err != nil {
			t.Fatalf("retention %v: %v", r, err)
		}
	}
}
