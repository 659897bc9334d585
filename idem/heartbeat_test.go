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

// renewLog counts each record's renewals and notes a renewal that
// follows the record's completion.
type renewLog struct {
	idem.Store
	mu        sync.Mutex
	renewals  map[string]int
	completed map[string]bool
	late      []string
	changed   *sync.Cond
}

func (s *renewLog) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	err := s.Store.Renew(ctx, id, owner, leaseExpires, now)
	s.mu.Lock()
	s.renewals[id]++
	if s.completed[id] {
		s.late = append(s.late, id)
	}
	s.changed.Broadcast()
	s.mu.Unlock()
	return err
}

func (s *renewLog) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.mu.Lock()
	s.completed[claim.ID] = true
	s.mu.Unlock()
	return s.Store.Complete(ctx, claim, out, now)
}

// TestHeartbeatTimersLentAcrossRequests: the Guard lends a heartbeat's
// timer, stopped before it fired, to a later heartbeat. Under parallel
// requests on a 1 ms heartbeat, some handlers returning at once (the timer
// stopped before it fired, lent again) and some waiting for two renewals
// of their own record (stopped after it fired, or re-armed and stopped),
// every waiting handler's own lease is renewed, and no record is renewed
// after its completion: a lent timer never renews the heartbeat it was
// lent by.
func TestHeartbeatTimersLentAcrossRequests(t *testing.T) {
	s := &renewLog{renewals: map[string]int{}, completed: map[string]bool{}}
	s.changed = sync.NewCond(&s.mu)
	e := newEnv(t, func(c *idem.Config) {
		c.Heartbeat = time.Millisecond
		s.Store = c.Store
		c.Store = s
	})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("k_lent_%03d_%012d", w, i)
				id := scopeID(testTenant, "POST /runs", key)
				wait := (w+i)%2 == 0
				h := &handler{before: func(context.Context) {
					if !wait {
						return
					}
					s.mu.Lock()
					defer s.mu.Unlock()
					for s.renewals[id] < 2 {
						s.changed.Wait()
					}
				}}
				if r := e.call(h, v2event("POST", "POST /runs", key, `{}`)); r.StatusCode != 201 {
					t.Errorf("status %d %s", r.StatusCode, r.Body)
					return
				}
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.completed) != workers*each {
		t.Errorf("%d completions, want %d", len(s.completed), workers*each)
	}
	if len(s.late) > 0 {
		t.Errorf("%d renewals followed their record's completion", len(s.late))
	}
}
