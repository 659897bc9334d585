package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// cancelAt cancels the caller's context once the store write that when
// names has landed, its answer delivered: the caller's invocation ends
// right after that step of Do.
type cancelAt struct {
	ledger.Store
	when   func(next *ledger.Record, want ledger.Expect) bool
	cancel context.CancelFunc
}

func (s *cancelAt) Create(ctx context.Context, r *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	won, cur, err := s.Store.Create(ctx, r, now)
	if won && err == nil && s.when(r, ledger.Expect{}) {
		s.cancel()
	}
	return won, cur, err
}

func (s *cancelAt) Replace(ctx context.Context, n *ledger.Record, w ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	ok, cur, err := s.Store.Replace(ctx, n, w, now)
	if ok && err == nil && s.when(n, w) {
		s.cancel()
	}
	return ok, cur, err
}

// cancellingFencer issues increasing tokens and cancels the caller's
// context right after issuing one when armed.
type cancellingFencer struct {
	n      uint64
	cancel context.CancelFunc
}

func (f *cancellingFencer) Token(context.Context, string) (uint64, error) {
	f.n++
	if f.cancel != nil {
		f.cancel()
	}
	return f.n, nil
}

// A Do whose context ends at any step before its effect function is
// called (after the claim, after the fencing token, after the fire mark)
// never calls it: the attempt is given back released and unfired, Do
// returns the context's error, and the next Do fires at once, once. Before,
// a context that ended once the fire mark had landed (the store's answer
// arriving as the invocation ended, or a fire mark written after the
// token while the context was ending) still called the function with the
// ended context: a function that then returns the context's error (as an
// HTTP client does before sending anything) was taken for a request the
// context's end may have cut, and the attempt was recorded escaped: an
// effect that never left shown as possibly delivered.
func TestContextEndedBeforeTheCallFiresNothing(t *testing.T) {
	claimed := func(n *ledger.Record, w ledger.Expect) bool {
		return w.Owner == "" || (w.State == ledger.StateReleased || w.LeaseExpired) && n.State != ledger.StateReleased
	}
	fireMark := func(n *ledger.Record, w ledger.Expect) bool {
		return w.State == ledger.StateClaimed && n.State == ledger.StateFiring
	}
	for _, c := range []struct {
		name   string
		fenced bool
		when   func(*ledger.Record, ledger.Expect) bool
		token  bool
	}{
		{"unfenced, after the claim", false, claimed, false},
		{"fenced, after the claim", true, claimed, false},
		{"fenced, after the token", true, nil, true},
		{"fenced, after the fire mark", true, fireMark, false},
	} {
		t.Run(slugOf(c.name), func(t *testing.T) {
			clk := ledgertest.NewClock(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
			raw := memstore.New()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			never := func(*ledger.Record, ledger.Expect) bool { return false }
			st := &cancelAt{Store: raw, when: never, cancel: cancel}
			if c.when != nil {
				st.when = c.when
			}
			cfg := ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}}
			var fencer *cancellingFencer
			if c.fenced {
				fencer = &cancellingFencer{}
				if c.token {
					fencer.cancel = cancel
				}
				cfg.Fencer = fencer
			}
			l, err := ledger.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-" + slugOf(c.name)})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id}
			var sent atomic.Int32
			fn := func(ctx context.Context, _ ledger.Call) ([]byte, error) {
				if err := ctx.Err(); err != nil {
					return nil, err // an HTTP client sends nothing on an ended context
				}
				sent.Add(1)
				return []byte("charged"), nil
			}
			_, err = l.Do(ctx, eff, fn)
			if !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrUncertain) || sent.Load() != 0 {
				t.Fatalf("Do: %v, sent %d; want the context's error, not uncertain, nothing sent", err, sent.Load())
			}
			rec, err := raw.Get(context.Background(), "effect#"+id.EffectID)
			if err != nil || rec == nil {
				t.Fatalf("record: %v", err)
			}
			if a := rec.Attempts[len(rec.Attempts)-1]; rec.State != ledger.StateReleased || a.State != ledger.AttemptReleased || a.Fired {
				t.Fatalf("record %s, last attempt %s fired %v; want released, unfired", rec.State, a.State, a.Fired)
			}
			st.when = never
			if fencer != nil {
				fencer.cancel = nil
			}
			r, err := l.Do(context.Background(), eff, fn)
			if err != nil || r.Replayed || sent.Load() != 1 {
				t.Fatalf("the next Do: %+v %v, sent %d; want it fired at once, once", r, err, sent.Load())
			}
		})
	}
}

// hungClaim is a store whose claims never answer until their call's
// context ends; entered is closed when the first one is on the way.
type hungClaim struct {
	ledger.Store
	entered chan struct{}
	once    sync.Once
}

func (s *hungClaim) Create(ctx context.Context, r *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return false, nil, ctx.Err()
}

// A claim's store call outlives its caller's cancellation (it is given
// back after it landed, RED_TEAM 534), but not without bound: a store that
// never answers is given Config.OutcomeTimeout once the caller went away,
// and Do returns, nothing called.
func TestClaimOfAGoneCallerIsBoundedByTheOutcomeTimeout(t *testing.T) {
	st := &hungClaim{Store: memstore.New(), entered: make(chan struct{})}
	l, err := ledger.New(ledger.Config{Store: st, Wait: -1, OutcomeTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "hung-claim"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-st.entered
		cancel()
	}()
	called := false
	_, err = l.Do(ctx, ledger.Effect{Identity: id}, func(context.Context, ledger.Call) ([]byte, error) {
		called = true
		return nil, nil
	})
	if err == nil || called {
		t.Fatalf("Do: %v, called %t; want an error, nothing called", err, called)
	}
}

// lateClaim is a store that holds its first claim until the caller of
// Do has gone (gone closed): a claim whose call's context ended with the
// caller is then answered its context's error and applied later, by
// apply (a request the client gave up on that the server still applies,
// after the writes the client made next); one whose context did not end
// is applied and answered at once.
type lateClaim struct {
	ledger.Store
	gone    <-chan struct{}
	once    sync.Once
	pending []func()
}

func (s *lateClaim) Create(ctx context.Context, r *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	first := false
	s.once.Do(func() { first = true })
	if !first {
		return s.Store.Create(ctx, r, now)
	}
	<-s.gone
	if err := ctx.Err(); err != nil {
		s.pending = append(s.pending, func() { _, _, _ = s.Store.Create(context.Background(), r, now) })
		return false, nil, err
	}
	return s.Store.Create(ctx, r, now)
}

// A caller whose deadline passes while its claim is on the way has gone
// away as a cancelled one has: the claim waits for its answer and is
// given back after it landed, so the next Do fires at once, once. Before,
// the claim's call kept the caller's deadline and ended with it: its
// give-back found nothing, the claim landed after it, and the effect was
// in flight for the whole lease, then reported escaped (RED_TEAM 560, the
// deadline's path of 534).
func TestClaimCutByItsCallersDeadlineIsGivenBackAfterItLands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	st := &lateClaim{Store: memstore.New(), gone: ctx.Done()}
	l, err := ledger.New(ledger.Config{Store: st, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "deadline-claim"})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	fn := func(context.Context, ledger.Call) ([]byte, error) {
		calls++
		return []byte("ok"), nil
	}
	if _, err := l.Do(ctx, ledger.Effect{Identity: id}, fn); !errors.Is(err, context.DeadlineExceeded) || calls != 0 {
		t.Fatalf("the Do whose deadline passed: %v, calls %d; want the deadline's error, nothing called", err, calls)
	}
	for _, f := range st.pending {
		f()
	}
	r, err := l.Do(context.Background(), ledger.Effect{Identity: id}, fn)
	if err != nil || r.Replayed || calls != 1 {
		t.Fatalf("the next Do (%d late claims applied): %+v %v, calls %d; want it fired at once, once", len(st.pending), r, err, calls)
	}
	rec, err := l.Lookup(context.Background(), id.EffectID)
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	if a := rec.Attempts[0]; a.State != ledger.AttemptReleased || a.Fired {
		t.Fatalf("the cut attempt: %s, fired %t; want released, unfired", a.State, a.Fired)
	}
}
