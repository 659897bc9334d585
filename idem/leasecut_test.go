package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
)

// errRenewDown is the failure of a renewal that is not fenced: the store
// unavailable, throttled past the SDK's retries, or timed out.
var errRenewDown = errors.New("injected: store unavailable")

// failingRenewals is a store whose renewals fail (not fenced) from the
// failFrom-th on. Each renewal takes every on the Guard's clock (the clock
// is advanced inside the store call, on the heartbeat's goroutine, so that
// the test never races the heartbeat's own clock readings).
type failingRenewals struct {
	idem.Store
	failFrom int
	took     func()

	mu sync.Mutex
	n  int
}

func (s *failingRenewals) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	defer s.took()
	if n >= s.failFrom {
		return errRenewDown
	}
	return s.Store.Renew(ctx, id, owner, leaseExpires, now)
}

// TestLeaseCutWhenRenewalsFail: when the heartbeat's renewals fail (not
// fenced) until the next could no longer land before the end of the last
// lease written, the handler's context ends with cause ErrLeaseLost
// before that lease end (the claim's own lease when the very first renewal
// fails), and no renewal follows; a same-key request that reclaims the
// record after that lease end runs only once the first handler's context
// has ended. The first handler's completion is then fenced (409
// idempotency_in_flight) and the record keeps the second's response. When
// nobody reclaimed, the cut handler's completion still lands (the fence is
// the owner token): one execution, its response recorded. A handler that
// stops when its context ends (returning its cause) is answered 409
// idempotency_in_flight when the record was reclaimed, else 503
// idemkit.store_unavailable (both with Retry-After), never a 500; the
// record is released, so a retry runs at once.
func TestLeaseCutWhenRenewalsFail(t *testing.T) {
	const lease, every = 30 * time.Second, 9 * time.Second
	for _, failFrom := range []int{1, 2} {
		for _, c := range []struct{ reclaim, stops bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
			reclaim, stops := c.reclaim, c.stops
			t.Run(fmt.Sprintf("failFrom=%d/reclaim=%t/stops=%t", failFrom, reclaim, stops), func(t *testing.T) {
				ticks := make(chan time.Time)
				var s *failingRenewals
				e := newEnv(t, func(c *idem.Config) {
					c.Lease, c.Heartbeat = lease, every
					s = &failingRenewals{Store: c.Store, failFrom: failFrom}
					c.Store = s
					c.Test.Clock = idemtest.ClockFuncs{NowFunc: c.Test.Clock.Now,
						NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
				})
				s.took = func() { e.clock.Advance(every) }
				id := scopeID(testTenant, "POST /runs", testKey)
				ev := v2event("POST", "POST /runs", testKey, `{}`)
				var firstCtx context.Context
				second := &handler{body: `{"who":"second"}`, before: func(context.Context) {
					if firstCtx.Err() == nil {
						t.Errorf("the reclaiming request ran while the first handler's context was live")
					}
				}}
				var secondResp string
				var first *handler
				first = &handler{body: `{"who":"first"}`, before: func(ctx context.Context) {
					firstCtx = ctx
					e.clock.Advance(every)
					cut := tickUntilCut(ctx, ticks, 10)
					rec, _, _ := e.store.Get(context.Background(), id, e.clock.Now())
					if !cut {
						t.Errorf("handler context still live at %s, the last lease written ended at %s", e.clock.Now(), rec.LeaseExpires)
					} else {
						if cause := context.Cause(ctx); !errors.Is(cause, idem.ErrLeaseLost) {
							t.Errorf("cause %v, want ErrLeaseLost", cause)
						}
						if !e.clock.Now().Before(rec.LeaseExpires) {
							t.Errorf("cut at %s, not before the last lease written ended (%s)", e.clock.Now(), rec.LeaseExpires)
						}
						// No renewal follows the cut: the heartbeat takes no tick.
						select {
						case ticks <- time.Time{}:
							t.Errorf("the heartbeat still renews after the cut")
						default:
						}
					}
					if stops {
						first.err = context.Cause(ctx) // the handler stops: its own goroutine reads err next
					}
					if reclaim {
						if left := rec.LeaseExpires.Sub(e.clock.Now()); left > 0 {
							e.clock.Advance(left)
						}
						secondResp = e.call(second, ev).Body
					}
				}}
				r := e.call(first, ev)
				if stops {
					code, _ := envelope(t, r.Body)
					wantStatus, wantCode := 503, idem.CodeStoreUnavailable
					if reclaim {
						wantStatus, wantCode = 409, "idempotency_in_flight"
					}
					if r.StatusCode != wantStatus || code != wantCode || r.Headers["Retry-After"] == "" {
						t.Fatalf("the cut handler that stopped answered %d %s %v, want %d %s with Retry-After", r.StatusCode, r.Body, r.Headers, wantStatus, wantCode)
					}
					if reclaim {
						if secondResp != `{"who":"second"}` {
							t.Fatalf("reclaim answered %s", secondResp)
						}
						return
					}
					// Released: a retry runs the handler again at once.
					if rr := e.call(second, ev); rr.Body != `{"who":"second"}` || second.Calls() != 1 {
						t.Fatalf("retry after the cut handler stopped: %d %s", rr.StatusCode, rr.Body)
					}
					return
				}
				if reclaim {
					if secondResp != `{"who":"second"}` || second.Calls() != 1 {
						t.Fatalf("reclaim answered %s (%d runs)", secondResp, second.Calls())
					}
					if code, _ := envelope(t, r.Body); r.StatusCode != 409 || code != "idempotency_in_flight" {
						t.Fatalf("the cut handler's completion answered %d %s", r.StatusCode, r.Body)
					}
				} else if r.StatusCode != 201 || r.Body != `{"who":"first"}` {
					t.Fatalf("the cut handler, not reclaimed, answered %d %s", r.StatusCode, r.Body)
				}
				want := `{"who":"first"}`
				if reclaim {
					want = `{"who":"second"}`
				}
				if rr := e.call(&handler{}, ev); rr.Body != want || rr.Headers["Openwop-Idempotent-Replay"] != "true" {
					t.Fatalf("replay %d %s, want %s", rr.StatusCode, rr.Body, want)
				}
				if first.Calls() != 1 {
					t.Fatalf("first handler ran %d times", first.Calls())
				}
			})
		}
	}
}

// deadlineRenewals records the deadline of each renewal's context.
type deadlineRenewals struct {
	idem.Store
	deadlines chan time.Time
}

func (s *deadlineRenewals) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	d, _ := ctx.Deadline()
	s.deadlines <- d
	return s.Store.Renew(ctx, id, owner, leaseExpires, now)
}

// TestRenewalBoundedByTheLease: a renewal's store call is bounded by the
// end of the lease written last (here the claim's), not only by
// StoreTimeout, so that a renewal that stalls fails, and the lease is cut,
// before that lease ends.
func TestRenewalBoundedByTheLease(t *testing.T) {
	const lease = 30 * time.Second
	ticks := make(chan time.Time)
	s := &deadlineRenewals{deadlines: make(chan time.Time, 1)}
	e := newEnv(t, func(c *idem.Config) {
		c.Lease, c.Heartbeat, c.StoreTimeout = lease, 9*time.Second, 10*lease
		s.Store = c.Store
		c.Store = s
		c.Test.Clock = idemtest.ClockFuncs{NowFunc: c.Test.Clock.Now,
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
	})
	h := &handler{before: func(context.Context) {
		// The claim was sent before the handler started: its lease ends
		// by started + lease (wall time).
		started := time.Now()
		ticks <- time.Time{}
		if d := <-s.deadlines; d.IsZero() || d.After(started.Add(lease)) {
			t.Errorf("renewal deadline %s, after the lease's end (by %s)", d, started.Add(lease))
		}
	}}
	if r := e.call(h, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 201 {
		t.Fatalf("answered %d %s", r.StatusCode, r.Body)
	}
}

// TestOnceLeaseCutWhenRenewalsFail: Guard.Once shares the heartbeat: with
// its renewals failing, Run's context ends with cause ErrLeaseLost before
// the claim's lease ends. A Run that stops with that cause gets it back
// (ran true) and leaves the record retryable, so the next call runs Run
// again at once; a Run that returns its value anyway (nobody took the
// record over) has it recorded, and the next call gets it back unrun.
func TestOnceLeaseCutWhenRenewalsFail(t *testing.T) {
	const lease, every = 30 * time.Second, 9 * time.Second
	for _, stops := range []bool{true, false} {
		t.Run(fmt.Sprintf("stops=%t", stops), func(t *testing.T) {
			ticks := make(chan time.Time)
			var s *failingRenewals
			e := newEnv(t, func(c *idem.Config) {
				c.Lease, c.Heartbeat = lease, every
				s = &failingRenewals{Store: c.Store, failFrom: 1}
				c.Store = s
				c.Test.Clock = idemtest.ClockFuncs{NowFunc: c.Test.Clock.Now,
					NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}
			})
			s.took = func() { e.clock.Advance(every) }
			claimed := e.clock.Now()
			runs := 0
			w := idem.Work{Operation: "charge-order", Key: "order-1", Payload: []byte(`{}`), Run: func(ctx context.Context) ([]byte, error) {
				runs++
				if runs > 1 {
					return []byte(`"again"`), nil
				}
				e.clock.Advance(every)
				cut := tickUntilCut(ctx, ticks, 10)
				if !cut || !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) || !e.clock.Now().Before(claimed.Add(lease)) {
					t.Errorf("Run's context: cut %t, cause %v, at %s (the claim's lease ends %s)", cut, context.Cause(ctx), e.clock.Now(), claimed.Add(lease))
				}
				if stops {
					return nil, context.Cause(ctx)
				}
				return []byte(`"first"`), nil
			}}
			v, ran, err := e.guard.Once(context.Background(), w)
			if stops {
				if !ran || !errors.Is(err, idem.ErrLeaseLost) {
					t.Fatalf("Once = %s, %t, %v; want ran, ErrLeaseLost", v, ran, err)
				}
				if v, ran, err := e.guard.Once(context.Background(), w); err != nil || !ran || string(v) != `"again"` || runs != 2 {
					t.Fatalf("retry: %s, %t, %v (runs %d)", v, ran, err, runs)
				}
				return
			}
			if err != nil || !ran || string(v) != `"first"` {
				t.Fatalf("Once = %s, %t, %v", v, ran, err)
			}
			if v, ran, err := e.guard.Once(context.Background(), w); err != nil || ran || string(v) != `"first"` || runs != 1 {
				t.Fatalf("second call: %s, %t, %v (runs %d)", v, ran, err, runs)
			}
		})
	}
}

// tickUntilCut hands the heartbeat up to n ticks, one at a time, and
// reports whether ctx was cut (Done) before it took them all.
func tickUntilCut(ctx context.Context, ticks chan<- time.Time, n int) bool {
	for range n {
		select {
		case ticks <- time.Time{}:
			continue
		case <-ctx.Done():
			return true
		}
	}
	return false
}
