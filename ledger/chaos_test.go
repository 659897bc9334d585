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

// TestChaosEffectSentOnceOutsideUncertainAttempts drives one effect per
// seed through rounds of 1..4 concurrent executors, every store and fence
// write failing at random before it applies or after (its answer lost), an
// effect function that succeeds, fails, is not sent, is uncertain, or is
// slow (the clock passes the lease while it runs, and other executors
// reclaim it), and an operator resolving the escaped effect as delivered
// or not delivered between and during the rounds; half the effects
// heartbeat (a slow function's renewals, failing at random too, keep or
// lose its lease). It checks what the
// ledger promises of every request that reached the provider:
//
//   - each is one attempt, recorded fired, and never released (it may have
//     reached the provider) nor missing;
//   - none follows an attempt recorded completed (a success, a failure, or
//     an operator's delivered);
//   - a second one follows only attempts recorded escaped (the documented
//     uncertain attempts, fired again under the same provider key);
//   - under a Fencer at most one reaches the provider, plus one for each
//     not-delivered resolution that reopened the fence.
//
// Run: go test -tags chaos -run TestChaosEffectSentOnce ./ledger/
// (IDEMKIT_CHAOS_ROUNDS effects, default 4000, half of them fenced, from
// seed IDEMKIT_CHAOS_SEED, default 0).
func TestChaosEffectSentOnceOutsideUncertainAttempts(t *testing.T) {
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
		chaosEffect(t, seed, seed%2 == 1, seed/2%2 == 1, &st)
	}
	t.Logf("%d effects: %d provider requests, %d effects reached more than once (after an escaped attempt), %d resolutions applied, %d not-delivered reopens, %d heartbeat ticks, %d slow functions cut by their lease",
		rounds, st.sends, st.resent, st.resolved, st.reopens, st.ticks, st.cut)
}

type chaosStats struct{ sends, resent, resolved, reopens, ticks, cut int }

var errChaos = errors.New("chaos: injected store failure")

// chaosFaults decides each write's fate: applied, failed before it
// applies, or applied with its answer lost.
type chaosFaults struct {
	mu  sync.Mutex
	rnd *rand.Rand
	p   float64
}

const (
	applied = iota
	failBefore
	lostAnswer
)

func (f *chaosFaults) roll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch x := f.rnd.Float64(); {
	case x < f.p:
		return failBefore
	case x < 2*f.p:
		return lostAnswer
	}
	return applied
}

// write runs do under fate r.
func write[T any](f *chaosFaults, do func() (bool, T, error)) (bool, T, error) {
	var zero T
	r := f.roll()
	if r == failBefore {
		return false, zero, errChaos
	}
	ok, v, err := do()
	if r == lostAnswer {
		return false, zero, errChaos
	}
	return ok, v, err
}

type chaosStore struct {
	ledger.Store
	f *chaosFaults
}

func (s *chaosStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	return write(s.f, func() (bool, *ledger.Record, error) { return s.Store.Create(ctx, rec, now) })
}

func (s *chaosStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	return write(s.f, func() (bool, *ledger.Record, error) { return s.Store.Replace(ctx, next, want, now) })
}

func (s *chaosStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if s.f.roll() == failBefore {
		return nil, errChaos
	}
	return s.Store.Get(ctx, key)
}

type chaosFence struct {
	fence.Store
	f *chaosFaults
}

func (s *chaosFence) Acquire(ctx context.Context, effectID string, seed uint64, now, expires time.Time) (uint64, *fence.Passed, error) {
	type acq struct {
		tok    uint64
		passed *fence.Passed
	}
	_, a, err := write(s.f, func() (bool, acq, error) {
		tok, p, err := s.Store.Acquire(ctx, effectID, seed, now, expires)
		return true, acq{tok, p}, err
	})
	return a.tok, a.passed, err
}

func (s *chaosFence) Pass(ctx context.Context, effectID string, token uint64, region string, now time.Time) (bool, *fence.Item, error) {
	return write(s.f, func() (bool, *fence.Item, error) { return s.Store.Pass(ctx, effectID, token, region, now) })
}

func (s *chaosFence) Reopen(ctx context.Context, effectID string, token uint64) (bool, *fence.Item, error) {
	return write(s.f, func() (bool, *fence.Item, error) { return s.Store.Reopen(ctx, effectID, token) })
}

type chaosSend struct {
	attempt int
	kind    string
}

func chaosEffect(t *testing.T, seed int64, fenced, heartbeat bool, st *chaosStats) {
	rnd := rand.New(rand.NewSource(seed))
	clk := ledgertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	faults := &chaosFaults{rnd: rand.New(rand.NewSource(seed*7 + 1)), p: 0.15}
	cfg := ledger.Config{Store: &chaosStore{Store: memstore.New(), f: faults}, Lease: 30 * time.Second, Wait: -1,
		Heartbeat: -1, MaxAttempts: 30, Test: ledger.TestConfig{Clock: clk}}
	tk := ledgertest.NewTicker()
	if heartbeat {
		cfg.Heartbeat, cfg.Test.Clock = 10*time.Second, ledgertest.ClockFuncs{NowFunc: clk.Now, NewTickerFunc: tk.New}
	}
	guard := func(fn ledger.Func) ledger.Func { return fn }
	if fenced {
		o, err := fence.New(fence.Config{Store: &chaosFence{Store: fencemem.New(), f: faults}, Now: clk.Now, Retention: 30 * 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Fencer, guard = o, o.Guard
	}
	l, err := ledger.New(cfg)
	if err != nil {
		t.Fatal(err)
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
				_, _ = l.Do(context.Background(), eff, guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
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
							clk.Advance(31 * time.Second) // past the lease, while it runs
							time.Sleep(time.Millisecond)
							break
						}
						// Past the lease several times over, renewed by
						// its heartbeat when a tick reaches it (renewals
						// fail at random like every write).
						for range 4 {
							clk.Advance(20 * time.Second)
							ticked := tk.TryTick()
							time.Sleep(200 * time.Microsecond)
							mu.Lock()
							if ticked {
								st.ticks++
							}
							if ctx.Err() != nil {
								st.cut++
							}
							mu.Unlock()
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
				// A not-delivered resolution that reached the fence may
				// have reopened it, whatever its record write did.
				if as == ledger.NotDelivered && fenced && (err == nil || errors.Is(err, ledger.ErrFenceReopened) || strings.Contains(err.Error(), "may have been reopened")) {
					reopens++
				}
			}()
		}
		wg.Wait()
		clk.Advance(31 * time.Second)
	}
	faults.p = 0
	rec, err := l.Lookup(context.Background(), id.EffectID)
	if err != nil || rec == nil {
		t.Fatalf("seed %d: record %v, %v", seed, rec, err)
	}
	checkChaosSends(t, fmt.Sprintf("seed %d (fenced %v, heartbeat %v)", seed, fenced, heartbeat), fenced, sends, rec, reopens, st)
}

// checkChaosSends checks the sends of one chaos round of an effect against
// the ledger's record of it (rec, read with faults off) and counts them in
// st: no attempt calls its function twice; an attempt that reached the
// provider is recorded fired and never released, after no completed
// attempt, and the one before it escaped; a fenced effect reaches it at
// most once more than it was reopened as not delivered.
func checkChaosSends(t *testing.T, label string, fenced bool, sends []chaosSend, rec *ledger.Record, reopens int, st *chaosStats) {
	t.Helper()
	rows := map[int]ledger.Attempt{}
	for _, a := range rec.Attempts {
		rows[a.N] = a
	}
	fail := func(format string, args ...any) {
		t.Errorf("%s: %s\nsends %+v\nattempts %+v", label, fmt.Sprintf(format, args...), sends, rec.Attempts)
	}
	var reached []chaosSend
	called := map[int]bool{}
	for _, s := range sends {
		if called[s.attempt] {
			fail("attempt %d called its effect function twice", s.attempt)
		}
		called[s.attempt] = true
		if s.kind == "not-sent" {
			continue
		}
		reached = append(reached, s)
		a, ok := rows[s.attempt]
		switch {
		case !ok || !a.Fired:
			fail("attempt %d reached the provider (%s) and is recorded %+v (present %v), not fired", s.attempt, s.kind, a, ok)
		case a.State == ledger.AttemptReleased:
			fail("attempt %d reached the provider (%s) and is recorded released", s.attempt, s.kind)
		}
		for _, b := range rec.Attempts {
			if b.N < s.attempt && b.State == ledger.AttemptCompleted {
				fail("attempt %d reached the provider after attempt %d was recorded completed", s.attempt, b.N)
			}
		}
	}
	for i, s := range reached {
		if i > 0 && rows[reached[i-1].attempt].State != ledger.AttemptEscaped {
			fail("attempt %d reached the provider after attempt %d, recorded %s, not escaped", s.attempt, reached[i-1].attempt, rows[reached[i-1].attempt].State)
		}
	}
	if fenced && len(reached) > 1+reopens {
		fail("a fenced effect reached the provider %d times with %d not-delivered reopens", len(reached), reopens)
	}
	st.sends += len(reached)
	if len(reached) > 1 {
		st.resent++
	}
	st.reopens += reopens
}
