package idem_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
)

// callLog records the order of a store's writes.
type callLog struct {
	idem.Store
	mu      sync.Mutex
	log     []string
	renewed chan struct{}
}

func (s *callLog) add(call string) {
	s.mu.Lock()
	s.log = append(s.log, call)
	s.mu.Unlock()
}

func (s *callLog) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	s.add("Renew " + owner)
	err := s.Store.Renew(ctx, id, owner, leaseExpires, now)
	select {
	case s.renewed <- struct{}{}:
	default:
	}
	return err
}

func (s *callLog) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.add("Complete " + claim.Owner)
	return s.Store.Complete(ctx, claim, out, now)
}

// TestHeartbeatRenewsUntilTheHandlerReturns: on the system clock's timer
// (and on a test's ticker), the heartbeat renews the lease again and
// again while the handler runs, each renewal moving the lease, and no
// renewal follows the completion: the heartbeat stops, a renewal under
// way finished, before the outcome is written.
func TestHeartbeatRenewsUntilTheHandlerReturns(t *testing.T) {
	for _, ticker := range []bool{false, true} {
		t.Run(fmt.Sprintf("ticker=%t", ticker), func(t *testing.T) {
			s := &callLog{renewed: make(chan struct{}, 1)}
			ticks := make(chan time.Time)
			e := newEnv(t, func(c *idem.Config) {
				c.Heartbeat = time.Millisecond
				s.Store = c.Store
				c.Store = s
				if ticker {
					c.Test.Clock = idemtest.ClockFuncs{NowFunc: c.Test.Clock.Now,
						NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
				}
			})
			for i := range 10 {
				key := fmt.Sprintf("k_heartbeat_%012d", i)
				id := scopeID(testTenant, "POST /runs", key)
				h := &handler{before: func(context.Context) {
					var last time.Time
					for range 3 {
						e.clock.Advance(time.Second)
						for { // until a renewal at the new time lands
							if ticker {
								ticks <- time.Time{}
							}
							<-s.renewed
							rec, _, _ := e.store.Get(context.Background(), id, e.clock.Now())
							if rec.Renewed.After(last) {
								last = rec.Renewed
								break
							}
						}
					}
				}}
				if r := e.call(h, v2event("POST", "POST /runs", key, `{}`)); r.StatusCode != 201 {
					t.Fatalf("status %d %s", r.StatusCode, r.Body)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			completed := map[string]bool{}
			renewals := 0
			for _, c := range s.log {
				call, owner, _ := strings.Cut(c, " ")
				switch call {
				case "Complete":
					completed[owner] = true
				case "Renew":
					renewals++
					if completed[owner] {
						t.Errorf("a renewal followed its request's completion")
					}
				}
			}
			if len(completed) != 10 || renewals < 30 {
				t.Errorf("%d completions, %d renewals; want 10, and at least 3 renewals each", len(completed), renewals)
			}
		})
	}
}
