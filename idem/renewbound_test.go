package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
)

// boundRenewals records the deadline of each renewal's context and the
// lease end the record held when it was made, then fails the renewal (not
// fenced), as a store that stalls until its context ends would.
type boundRenewals struct {
	idem.Store
	deadline, leaseEnd chan time.Time
}

func (s *boundRenewals) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	dl, _ := ctx.Deadline()
	rec, _, err := s.Store.Get(context.Background(), id, now)
	if err != nil {
		return err
	}
	s.deadline <- dl
	s.leaseEnd <- rec.LeaseExpires
	return errRenewDown
}

// A renewal that stalls must fail before the lease it tries to extend has
// ended, so that the handler's context is cut while no same-key request
// can reclaim the record yet: its store call is bounded by a margin before
// that lease end, even when StoreTimeout is longer than the time left.
func TestStalledRenewalEndsBeforeTheLease(t *testing.T) {
	const lease, every = 30 * time.Second, 10 * time.Second
	ticks := make(chan time.Time)
	s := &boundRenewals{deadline: make(chan time.Time, 1), leaseEnd: make(chan time.Time, 1)}
	e := newEnv(t, func(c *idem.Config) {
		c.Lease, c.Heartbeat, c.StoreTimeout = lease, every, time.Minute
		s.Store = c.Store
		c.Store = s
		c.Test.Clock = idemtest.ClockFuncs{NowFunc: time.Now,
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
	})
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	_, err := e.guard.Do(context.Background(), idem.Request{Event: ev}, func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
		ticks <- time.Now()
		dl, end := <-s.deadline, <-s.leaseEnd
		if !dl.Before(end.Add(-every / 20)) {
			t.Errorf("the renewal may run until %v, %v before the lease ends at %v; want it to fail a margin before", dl.Format(time.StampMilli), end.Sub(dl), end.Format(time.StampMilli))
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 201}, nil
	})
	if err != nil && !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatal(err)
	}
}
