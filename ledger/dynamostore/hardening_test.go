package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// renewStore signals every heartbeat renewal (a Replace of a firing record
// expecting firing, by the same owner and attempt) with its result.
type renewStore struct {
	ledger.Store
	renewed chan error
}

func (s *renewStore) Replace(ctx context.Context, n *ledger.Record, w ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	ok, cur, err := s.Store.Replace(ctx, n, w, now)
	if n.State == ledger.StateFiring && w.State == ledger.StateFiring && n.Owner == w.Owner && n.Attempt == w.Attempt {
		switch {
		case err != nil:
			s.renewed <- err
		case !ok:
			s.renewed <- ledger.ErrLeaseLost
		default:
			s.renewed <- nil
		}
	}
	return ok, cur, err
}

// heartbeating is a ledger on v's store, its renewals reported by rs, with
// a 30 s lease renewed every 10 s by tk's ticks on v's clock.
func heartbeating(t *testing.T, v *env) (*renewStore, *ledgertest.Ticker, *ledger.Ledger) {
	t.Helper()
	rs := &renewStore{Store: v.store, renewed: make(chan error, 16)}
	tk := ledgertest.NewTicker()
	a, err := ledger.New(ledger.Config{Store: rs, Lease: 30 * time.Second, Heartbeat: 10 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: v.clock.Now, NewTickerFunc: tk.New}}})
	if err != nil {
		t.Fatal(err)
	}
	return rs, tk, a
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

// Heartbeat renewals under injected DynamoDB faults: an error the SDK does
// not retry fails that renewal only (the next tick renews, the effect is not
// cancelled); a renewal applied whose response is lost is retried by the SDK
// and succeeds; the lease keeps a second executor out throughout.
func TestHeartbeatUnderFaults(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		rs, tk, a := heartbeating(t, v)
		eff := business(t, "hb-faults")
		started, release := make(chan context.Context, 1), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := a.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
				started <- ctx
				<-release
				return v.prov.Call(ctx, c.ProviderKey, "x")
			})
			done <- err
		}()
		fctx := wait(t, started)

		v.faults.FailNext("PutItem", 1, dynamotest.InternalServerError())
		v.clock.Advance(10 * time.Second)
		tk.Tick()
		if err := wait(t, rs.renewed); err == nil {
			t.Fatal("renewal with an injected error succeeded")
		}
		v.faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		v.clock.Advance(10 * time.Second)
		tk.Tick()
		if err := wait(t, rs.renewed); err != nil {
			t.Fatalf("renewal with a lost response: %v", err)
		}
		if v.faults.Pending() != 0 || fctx.Err() != nil {
			t.Fatalf("pending faults %d, effect context %v", v.faults.Pending(), fctx.Err())
		}
		v.clock.Advance(25 * time.Second) // past the fire mark's lease, inside the renewed one
		if _, err := v.l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
			t.Error("second executor fired")
			return nil, nil
		}); !errors.Is(err, ledger.ErrInFlight) {
			t.Fatalf("second executor: %v; want ErrInFlight", err)
		}
		close(release)
		if err := wait(t, done); err != nil {
			t.Fatal(err)
		}
		rec, _ := v.store.Get(context.Background(), "effect#"+eff.Identity.EffectID)
		if rec.State != ledger.StateCompleted || v.prov.Effects() != 1 || v.prov.Requests() != 1 {
			t.Fatalf("state %s provider %d/%d", rec.State, v.prov.Effects(), v.prov.Requests())
		}
	})
}

// Heartbeat renewals failing on DynamoDB until the lease last written would
// end before the next tick (a 500 the SDK does not retry, then throttling
// past the SDK's retries, which lasts through the outcome write of the
// success the function then returns): the effect function's context is
// cancelled with cause ErrLeaseLost while the clock is still before that
// lease end, Do returns ErrLeaseLost and writes nothing more (the record
// stays firing with that lease), a second executor fires nothing inside the lease, and after
// it reclaims the attempt as escaped and fires, with the first function's
// context already ended, under the same provider key.
func TestHeartbeatFailingPastLeaseCancels(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		rs, tk, a := heartbeating(t, v)
		eff := business(t, "hb-fail-past-lease")
		key := "effect#" + eff.Identity.EffectID
		started := make(chan context.Context, 1)
		done := make(chan error, 1)
		go func() {
			_, err := a.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
				if _, err := v.prov.Call(ctx, c.ProviderKey, "x"); err != nil {
					return nil, err
				}
				started <- ctx
				<-ctx.Done()
				return []byte("value from A"), nil
			})
			done <- err
		}()
		fctx := wait(t, started)
		rec, err := v.store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		leaseEnd := rec.LeaseUntil

		v.faults.FailNext("PutItem", 1, dynamotest.InternalServerError())
		v.clock.Advance(10 * time.Second)
		tk.Tick()
		if err := wait(t, rs.renewed); err == nil {
			t.Fatal("renewal 1 with an injected 500 succeeded")
		}
		if fctx.Err() != nil {
			t.Fatalf("cancelled while a renewal could still land: %v", context.Cause(fctx))
		}
		// Throttled past the SDK's retries twice over: renewal 2, then the
		// outcome write of the success the function returns once its
		// context ends (the outage lasts), so that success stays
		// unrecorded (a success that can be written is recorded:
		// Suite/Hardening/HeartbeatGaveUpSuccessIsRecorded).
		v.faults.FailNext("PutItem", 6, dynamotest.Throttle())
		v.clock.Advance(10 * time.Second)
		tk.Tick()
		if err := wait(t, rs.renewed); err == nil {
			t.Fatal("renewal 2 throttled past the SDK's retries succeeded")
		}
		wait(t, fctx.Done())
		if now := v.clock.Now(); !now.Before(leaseEnd) {
			t.Fatalf("cancelled at %s, not before the lease end %s", now, leaseEnd)
		}
		if c := context.Cause(fctx); !errors.Is(c, ledger.ErrLeaseLost) {
			t.Fatalf("context cause %v; want ErrLeaseLost", c)
		}
		if err := wait(t, done); !errors.Is(err, ledger.ErrLeaseLost) {
			t.Fatalf("A: %v; want ErrLeaseLost", err)
		}
		if v.faults.Pending() != 0 || tk.Stopped() != 1 || tk.TryTick() {
			t.Fatalf("pending faults %d, heartbeat stopped %d", v.faults.Pending(), tk.Stopped())
		}
		rec, err = v.store.Get(context.Background(), key)
		if err != nil || rec.State != ledger.StateFiring || rec.Attempt != 1 || rec.Outcome != nil || !rec.LeaseUntil.Equal(leaseEnd) {
			t.Fatalf("record %+v %v; want firing, attempt 1, no outcome, lease %s", rec, err, leaseEnd)
		}

		calls := 0
		second := func(ctx context.Context, c ledger.Call) ([]byte, error) {
			calls++
			if fctx.Err() == nil {
				t.Error("the second executor fired while the first effect function's context was live")
			}
			return v.prov.Call(ctx, c.ProviderKey, "x")
		}
		if _, err := v.l.Do(context.Background(), eff, second); !errors.Is(err, ledger.ErrInFlight) {
			t.Fatalf("second executor inside the lease: %v; want ErrInFlight", err)
		}
		v.clock.Set(leaseEnd)
		r, err := v.l.Do(context.Background(), eff, second)
		if err != nil || r.Attempt != 2 || calls != 1 {
			t.Fatalf("second executor after the lease: %+v %v calls %d; want attempt 2 fired once", r, err, calls)
		}
		rec, _ = v.store.Get(context.Background(), key)
		var states []ledger.AttemptState
		for _, at := range rec.Attempts {
			states = append(states, at.State)
		}
		if !slices.Equal(states, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
			t.Fatalf("attempts %v; want escaped, completed", states)
		}
		if v.prov.Effects() != 1 || v.prov.Requests() != 2 {
			t.Fatalf("provider effects %d requests %d; want 1 effect (same provider key), 2 requests", v.prov.Effects(), v.prov.Requests())
		}
	})
}

// The point of no return is applied but every response (the SDK's retries
// included) is lost: Do fails without calling the effect function and gives
// the attempt back unfired (a conditional write from either state, of which
// one applies), so the next Do fires at once with the same provider key and
// the attempt is shown released, not escaped: nothing left. Without a Fencer
// the point of no return is the claim itself (PutItem #1, written firing);
// with one it is the fire mark (PutItem #2, after the claim).
func TestFireMarkResponsesLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, fenced := range []bool{false, true} {
			t.Run(fmt.Sprintf("fenced=%t", fenced), func(t *testing.T) {
				v := newEnv(t, e)
				eff := business(t, fmt.Sprintf("fire-lost-%t", fenced))
				// The write in state firing and its 2 SDK retries lose
				// their responses.
				calls := 0
				first := true
				st := &hookPut{Store: v.store, before: func(n *ledger.Record) {
					if n.State == ledger.StateFiring && first {
						first = false
						v.faults.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
					}
				}}
				cfg := ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: v.clock.Now}}}
				if fenced {
					cfg.Fencer = &counterFencer{}
				}
				l, _ := ledger.New(cfg)
				if _, err := l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
					calls++
					return nil, nil
				}); err == nil || calls != 0 || first {
					t.Fatalf("Do with a lost point of no return: %v calls %d (fault armed: %t); want an error and no fire", err, calls, !first)
				}
				v.faults.Clear()
				r, err := v.l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
					calls++
					return v.prov.Call(ctx, c.ProviderKey, "x")
				})
				if err != nil || r.Attempt != 2 || calls != 1 || r.ProviderKey != eff.Identity.ProviderKey {
					t.Fatalf("retry %+v %v calls %d", r, err, calls)
				}
				rec, _ := v.store.Get(context.Background(), "effect#"+eff.Identity.EffectID)
				var states []ledger.AttemptState
				for _, a := range rec.Attempts {
					states = append(states, a.State)
				}
				if !slices.Equal(states, []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}) {
					t.Fatalf("attempts %v; want [released completed]: the first attempt never fired", states)
				}
			})
		}
	})
}

// counterFencer issues fencing tokens 1, 2, 3, ….
type counterFencer struct{ n atomic.Uint64 }

func (f *counterFencer) Token(context.Context, string) (uint64, error) { return f.n.Add(1), nil }

// hookPut calls before ahead of every Create and Replace.
type hookPut struct {
	ledger.Store
	before func(n *ledger.Record)
}

func (s *hookPut) Create(ctx context.Context, n *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	s.before(n)
	return s.Store.Create(ctx, n, now)
}

func (s *hookPut) Replace(ctx context.Context, n *ledger.Record, w ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	s.before(n)
	return s.Store.Replace(ctx, n, w, now)
}

// Bug found in review: a successful effect whose value does not fit in the
// record (DynamoDB items are limited to 400 KB) had its outcome write
// refused after the provider call, so every later attempt fired again. The
// value is now left out of the record (Outcome.Dropped) and the outcome is
// recorded.
func TestOversizedValueIsRecordedWithoutIt(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		eff := business(t, "big-value")
		big := make([]byte, 450<<10)
		calls := 0
		fn := func(ctx context.Context, c ledger.Call) ([]byte, error) {
			calls++
			if _, err := v.prov.Call(ctx, c.ProviderKey, "x"); err != nil {
				return nil, err
			}
			return big, nil
		}
		r, err := v.l.Do(context.Background(), eff, fn)
		if err != nil || len(r.Value) != len(big) || r.ValueDropped {
			t.Fatalf("first Do: %v (value %d bytes, dropped %v)", err, len(r.Value), r.ValueDropped)
		}
		v.clock.Advance(time.Hour)
		d, err := v.l.Do(context.Background(), eff, fn)
		if err != nil || !d.Replayed || !d.ValueDropped || d.Value != nil || calls != 1 || v.prov.Requests() != 1 {
			t.Fatalf("duplicate: %+v %v calls %d requests %d", d, err, calls, v.prov.Requests())
		}
	})
}
