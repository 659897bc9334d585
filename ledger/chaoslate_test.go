//go:build chaos

package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// lateFaults decides each store and fence write's fate: applied, failed
// before it applies, applied with its answer lost, or late: answered an
// error at once and applied later, after other writes (a request whose
// client gave up on it, a timeout, that the server still applies). A late
// write's condition is judged when it applies, against the time its
// caller sent (as DynamoDB judges a request's expression values).
type lateFaults struct {
	mu      sync.Mutex
	rnd     *rand.Rand
	p       float64
	pending []func()
}

// late is the fate of a write applied after its caller got an error.
const late = lostAnswer + 1

// roll picks the next write's fate and, now and then, a late write to
// apply first.
func (f *lateFaults) roll() (int, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var flush func()
	if len(f.pending) > 0 && f.rnd.Intn(3) == 0 {
		i := f.rnd.Intn(len(f.pending))
		flush = f.pending[i]
		f.pending = append(f.pending[:i], f.pending[i+1:]...)
	}
	switch x := f.rnd.Float64(); {
	case x < f.p:
		return failBefore, flush
	case x < 2*f.p:
		return lostAnswer, flush
	case x < 3*f.p:
		return late, flush
	}
	return applied, flush
}

func (f *lateFaults) flushAll() {
	f.mu.Lock()
	p := f.pending
	f.pending = nil
	f.mu.Unlock()
	for _, fn := range p {
		fn()
	}
}

func lwrite[T any](f *lateFaults, do func() (bool, T, error)) (bool, T, error) {
	var zero T
	r, flush := f.roll()
	if flush != nil {
		flush()
	}
	switch r {
	case failBefore:
		return false, zero, errChaos
	case late:
		f.mu.Lock()
		f.pending = append(f.pending, func() { _, _, _ = do() })
		f.mu.Unlock()
		return false, zero, errChaos
	}
	ok, v, err := do()
	if r == lostAnswer {
		return false, zero, errChaos
	}
	return ok, v, err
}

type lateStore struct {
	ledger.Store
	f *lateFaults
}

func (s *lateStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	rec = rec.Clone()
	return lwrite(s.f, func() (bool, *ledger.Record, error) { return s.Store.Create(context.Background(), rec, now) })
}

func (s *lateStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	next = next.Clone()
	return lwrite(s.f, func() (bool, *ledger.Record, error) { return s.Store.Replace(context.Background(), next, want, now) })
}

type lateFence struct {
	fence.Store
	f *lateFaults
}

func (s *lateFence) Acquire(ctx context.Context, effectID string, seed uint64, now, expires time.Time) (uint64, *fence.Passed, error) {
	type acq struct {
		tok    uint64
		passed *fence.Passed
	}
	_, a, err := lwrite(s.f, func() (bool, acq, error) {
		tok, p, err := s.Store.Acquire(context.Background(), effectID, seed, now, expires)
		return true, acq{tok, p}, err
	})
	return a.tok, a.passed, err
}

func (s *lateFence) Pass(ctx context.Context, effectID string, token uint64, region string, now time.Time) (bool, *fence.Item, error) {
	return lwrite(s.f, func() (bool, *fence.Item, error) {
		return s.Store.Pass(context.Background(), effectID, token, region, now)
	})
}

func (s *lateFence) Reopen(ctx context.Context, effectID string, token uint64) (bool, *fence.Item, error) {
	return lwrite(s.f, func() (bool, *fence.Item, error) { return s.Store.Reopen(context.Background(), effectID, token) })
}

func (s *lateFence) Keep(ctx context.Context, effectID string, token uint64, now, until time.Time) (bool, error) {
	ok, _, err := lwrite(s.f, func() (bool, struct{}, error) {
		ok, err := s.Store.Keep(context.Background(), effectID, token, now, until)
		return ok, struct{}{}, err
	})
	return ok, err
}

// TestChaosLateWritesAndSkewedExecutors is
// TestChaosEffectSentOnceOutsideUncertainAttempts under two more faults:
// writes the store or the fence applies after their caller was answered an
// error (and acted on it: released, gave up, tried again), in any order
// with later writes, and executors whose clocks disagree by up to 18 s
// (each of four ledgers on the one store is off by up to 9 s either way;
// Lease less Heartbeat is 20 s). It checks the same promises of every
// request that reached the provider.
//
// Run: go test -tags chaos -run TestChaosLateWrites ./ledger/
// (IDEMKIT_CHAOS_ROUNDS effects, default 4000, from seed
// IDEMKIT_CHAOS_SEED, default 0; a quarter of them fenced with
// heartbeats, a quarter fenced without, and so on).
func TestChaosLateWritesAndSkewedExecutors(t *testing.T) {
	rounds, first := int64(4000), int64(0)
	for name, v := range map[string]*int64{"IDEMKIT_CHAOS_ROUNDS": &rounds, "IDEMKIT_CHAOS_SEED": &first} {
		if s := strings.TrimSpace(os.Getenv(name)); s != "" {
			if _, err := fmt.Sscan(s, v); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	var st chaosStats
	for seed := first; seed < first+rounds && !t.Failed(); seed++ {
		lateEffect(t, seed, seed%2 == 1, seed/2%2 == 1, &st)
	}
	t.Logf("%d effects: %d provider requests, %d effects reached more than once (after an escaped attempt), %d resolutions applied, %d not-delivered reopens",
		rounds, st.sends, st.resent, st.resolved, st.reopens)
}

func lateEffect(t *testing.T, seed int64, fenced, heartbeat bool, st *chaosStats) {
	rnd := rand.New(rand.NewSource(seed))
	clk := ledgertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	faults := &lateFaults{rnd: rand.New(rand.NewSource(seed*7 + 1)), p: 0.15}
	cfg := ledger.Config{Store: &lateStore{Store: memstore.New(), f: faults}, Lease: 30 * time.Second, Wait: -1,
		Heartbeat: -1, MaxAttempts: 30, Test: ledger.TestConfig{Clock: clk}}
	tk := ledgertest.NewTicker()
	if heartbeat {
		cfg.Heartbeat, cfg.Test.Clock = 10*time.Second, ledgertest.ClockFuncs{NowFunc: clk.Now, NewTickerFunc: tk.New}
	}
	guard := func(fn ledger.Func) ledger.Func { return fn }
	if fenced {
		o, err := fence.New(fence.Config{Store: &lateFence{Store: fencemem.New(), f: faults}, Now: clk.Now, Retention: 30 * 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Fencer, guard = o, o.Guard
	}
	l, err := ledger.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var skewed []*ledger.Ledger
	for i := 0; i < 4; i++ {
		d := time.Duration(rnd.Intn(18001)-9000) * time.Millisecond
		c := cfg
		now := func() time.Time { return clk.Now().Add(d) }
		if heartbeat {
			c.Test.Clock = ledgertest.ClockFuncs{NowFunc: now, NewTickerFunc: tk.New}
		} else {
			c.Test.Clock = ledgertest.ClockFuncs{NowFunc: now}
		}
		sl, err := ledger.New(c)
		if err != nil {
			t.Fatal(err)
		}
		skewed = append(skewed, sl)
	}
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: fmt.Sprint("order-", seed)})
	var mu sync.Mutex
	var sends []chaosSend
	reopens := 0
	kinds := []string{"ok", "not-sent", "uncertain", "failed", "slow"}
	for round := 0; round < 40; round++ {
		var wg sync.WaitGroup
		for i, n := 0, 1+rnd.Intn(4); i < n; i++ {
			kind := kinds[rnd.Intn(len(kinds))]
			eff := ledger.Effect{Identity: id, RunID: fmt.Sprintf("acme/run-%016d", i), NodeID: "charge"}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = skewed[i].Do(context.Background(), eff, guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
					mu.Lock()
					sends = append(sends, chaosSend{c.Attempt, kind})
					mu.Unlock()
					switch kind {
					case "not-sent":
						return nil, ledger.NotSent(errors.New("connection refused"))
					case "uncertain":
						return nil, ledger.Uncertain(errors.New("timeout after sending"))
					case "failed":
						return nil, errors.New("402 card declined")
					case "slow":
						if !heartbeat {
							clk.Advance(31 * time.Second)
							time.Sleep(time.Millisecond)
							break
						}
						for range 4 {
							clk.Advance(20 * time.Second)
							tk.TryTick()
							time.Sleep(200 * time.Microsecond)
							if ctx.Err() != nil {
								return nil, context.Cause(ctx)
							}
						}
					}
					return []byte("ch_1"), nil
				}))
			}()
		}
		if rnd.Intn(3) == 0 {
			as := ledger.Delivered
			if rnd.Intn(2) == 0 {
				as = ledger.NotDelivered
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := l.ShowEffect(context.Background(), id.EffectID)
				if err != nil || v.State != ledger.EffectEscaped {
					return
				}
				_, err = l.Resolve(context.Background(), id.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: v.Rev})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					st.resolved++
				}
				if as == ledger.NotDelivered && fenced && (err == nil || errors.Is(err, ledger.ErrFenceReopened) || strings.Contains(err.Error(), "may have been reopened") || errors.Is(err, ledger.ErrFenceReopenUnknown)) {
					reopens++
				}
			}()
		}
		wg.Wait()
		if rnd.Intn(2) == 0 {
			faults.flushAll()
		}
		clk.Advance(31 * time.Second)
	}
	faults.flushAll()
	faults.p = 0
	rec, err := l.Lookup(context.Background(), id.EffectID)
	if err != nil || rec == nil {
		t.Fatalf("seed %d: record %v, %v", seed, rec, err)
	}
	checkChaosSends(t, fmt.Sprintf("seed %d (fenced %v)", seed, fenced), fenced, sends, rec, reopens, st)
}
