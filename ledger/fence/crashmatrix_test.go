package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/crashpoint"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// Step boundaries of a fenced Do, each a point where the first executor
// dies (its goroutine stops, nothing it sends later reaches a store) or
// where a write applies and its answer is lost (the executor goes on).
const (
	fxAfterClaim       = "after-claim"
	fxDuringToken      = "during-token"     // the fence issued the token; the answer never came
	fxAfterToken       = "after-token"      // token in hand, fire mark never sent
	fxDuringFireMark   = "during-fire-mark" // fire mark applied, answer never came
	fxFireMarkLost     = "fire-mark-lost"   // fire mark applied, the store said error
	fxDuringPass       = "during-pass"      // the pass applied, answer never came
	fxPassLost         = "pass-lost"        // the pass applied, the fence said error
	fxAfterPass        = "after-pass"       // passed; the provider is not called
	fxAfterProvider    = "after-provider"   // the provider performed the effect
	fxBeforeOutcome    = "before-outcome"   // fn returned; the outcome is never sent
	fxDuringOutcome    = "during-outcome"   // the outcome applied, answer never came
	fxOutcomeLost      = "outcome-lost"     // the outcome applied, the store said error
	fxCtxCancelAtClaim = "ctx-cancel-after-claim"
)

var fencedPoints = []string{fxAfterClaim, fxDuringToken, fxAfterToken, fxDuringFireMark, fxFireMarkLost,
	fxDuringPass, fxPassLost, fxAfterPass, fxAfterProvider, fxBeforeOutcome, fxDuringOutcome, fxOutcomeLost,
	fxCtxCancelAtClaim}

var errLost = errors.New("injected: the answer was lost")

// dyingLedgerStore is the first executor's effect store.
type dyingLedgerStore struct {
	ledger.Store
	p      *crashpoint.Process
	cancel context.CancelFunc
}

func (d *dyingLedgerStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	if d.p.Dead() {
		return false, nil, d.p.Die()
	}
	won, cur, err := d.Store.Create(ctx, rec, now)
	if err == nil && won {
		switch d.p.Point {
		case fxAfterClaim:
			return false, nil, d.p.Die()
		case fxCtxCancelAtClaim:
			d.cancel()
		}
	}
	return won, cur, err
}

func (d *dyingLedgerStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if d.p.Dead() {
		return false, nil, d.p.Die()
	}
	fireMark := want.State == ledger.StateClaimed && next.State == ledger.StateFiring
	outcome := want.State == ledger.StateFiring && next.State != ledger.StateFiring
	if outcome && d.p.Point == fxBeforeOutcome {
		return false, nil, d.p.Die()
	}
	ok, cur, err := d.Store.Replace(ctx, next, want, now)
	if err != nil || !ok {
		return ok, cur, err
	}
	switch {
	case fireMark && d.p.Point == fxDuringFireMark, outcome && d.p.Point == fxDuringOutcome:
		return false, nil, d.p.Die()
	case fireMark && d.p.Point == fxFireMarkLost, outcome && d.p.Point == fxOutcomeLost:
		return false, nil, errLost
	}
	return ok, cur, err
}

func (d *dyingLedgerStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if d.p.Dead() {
		return nil, d.p.Die()
	}
	return d.Store.Get(ctx, key)
}

// dyingFenceStore is the first executor's fence store.
type dyingFenceStore struct {
	fence.Store
	p *crashpoint.Process
}

func (d *dyingFenceStore) Acquire(ctx context.Context, id string, seed uint64, now, exp time.Time) (uint64, *fence.Passed, error) {
	if d.p.Dead() {
		return 0, nil, d.p.Die()
	}
	tok, passed, err := d.Store.Acquire(ctx, id, seed, now, exp)
	if err == nil && passed == nil && d.p.Point == fxDuringToken {
		return 0, nil, d.p.Die()
	}
	return tok, passed, err
}

func (d *dyingFenceStore) Pass(ctx context.Context, id string, tok uint64, region string, now time.Time) (bool, *fence.Item, error) {
	if d.p.Dead() {
		return false, nil, d.p.Die()
	}
	ok, cur, err := d.Store.Pass(ctx, id, tok, region, now)
	if err == nil && ok {
		switch d.p.Point {
		case fxDuringPass:
			return false, nil, d.p.Die()
		case fxPassLost:
			return false, nil, errLost
		}
	}
	return ok, cur, err
}

func (d *dyingFenceStore) Reopen(ctx context.Context, id string, tok uint64) (bool, *fence.Item, error) {
	if d.p.Dead() {
		return false, nil, d.p.Die()
	}
	return d.Store.Reopen(ctx, id, tok)
}

func (d *dyingFenceStore) Keep(ctx context.Context, id string, tok uint64, now, exp time.Time) (bool, error) {
	if d.p.Dead() {
		return false, d.p.Die()
	}
	return d.Store.Keep(ctx, id, tok, now, exp)
}

// dieAfterToken stops the executor between its token and its fire mark.
type dieAfterToken struct {
	*fence.Owner
	p *crashpoint.Process
}

func (f dieAfterToken) Token(ctx context.Context, id string) (uint64, error) {
	tok, err := f.Owner.Token(ctx, id)
	if err == nil && f.p.Point == fxAfterToken {
		return 0, f.p.Die()
	}
	return tok, err
}

// TestFencedCrashMatrix: with a fence owner configured, the first executor
// dies (or loses an answer, or has its context cancelled) at every step
// boundary of Do; then healthy executors take over once its lease has
// ended. The provider is called at most once, and when it was not called
// before the crash it is called exactly once afterwards, unless the fence
// holds a pass it cannot tell was not delivered (then nothing fires: the
// effect waits for an operator).
func TestFencedCrashMatrix(t *testing.T) {
	for _, point := range fencedPoints {
		t.Run(point, func(t *testing.T) { fencedCrashCase(t, point) })
	}
}

func fencedCrashCase(t *testing.T, point string) {
	clk := ledgertest.NewClock(t0)
	fences := fencemem.New()
	store := memstore.New()
	var mu sync.Mutex
	calls := 0
	call := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		return []byte("ch_1"), nil
	}
	const lease = 30 * time.Second
	executor := func(st ledger.Store, fs fence.Store, wrap func(*fence.Owner) ledger.Fencer) (*ledger.Ledger, *fence.Owner) {
		o, err := fence.New(fence.Config{Store: fs, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		var f ledger.Fencer = o
		if wrap != nil {
			f = wrap(o)
		}
		l, err := ledger.New(ledger.Config{Store: st, Lease: lease, Wait: -1, Fencer: f,
			OutcomeTimeout: time.Second,
			Test:           ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		return l, o
	}
	eff := effect(t, "crash-"+point)
	procs := crashpoint.NewGroup(t)
	firstDone := make(chan error, 1)
	procs.Crash(point, func(p *crashpoint.Process) func() {
		ctx, cancel := context.WithCancel(context.Background())
		ds := &dyingLedgerStore{Store: store, p: p, cancel: cancel}
		fs := &dyingFenceStore{Store: fences, p: p}
		l, o := executor(ds, fs, func(o *fence.Owner) ledger.Fencer { return dieAfterToken{Owner: o, p: p} })
		return func() {
			defer cancel()
			_, err := l.Do(ctx, eff, o.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
				v, err := call(ctx, c)
				if p.Point == fxAfterProvider {
					return nil, p.Die()
				}
				return v, err
			}))
			firstDone <- err
			// Points that lose an answer or cancel do not kill the
			// executor: it returns, then counts as gone.
			p.Die()
		}
	})
	select {
	case err := <-firstDone:
		t.Logf("first executor returned: %v", err)
	default:
	}
	mu.Lock()
	before := calls
	mu.Unlock()

	healthy, ho := executor(store, fences, nil)
	var last error
	var res ledger.Result
	for i := 0; i < 6; i++ {
		clk.Advance(lease + time.Second)
		res, last = healthy.Do(context.Background(), eff, ho.Guard(call))
		if last == nil || errors.Is(last, fence.ErrIssued) {
			break
		}
		t.Logf("recovery %d: %v", i, last)
	}
	mu.Lock()
	after := calls
	mu.Unlock()
	t.Logf("calls before takeover %d, after %d; last %v", before, after, last)
	if after > 1 {
		t.Fatalf("the provider was called %d times", after)
	}
	if before == 0 && after == 0 && !errors.Is(last, fence.ErrIssued) {
		t.Fatalf("nothing fired and recovery ended with %v", last)
	}
	if last == nil && after == 1 && before == 1 && !res.Replayed {
		t.Fatalf("a recovery that fired nothing returned a fresh result: %+v", res)
	}
	// A duplicate gets the same answer.
	if last == nil {
		r2, err := healthy.Do(context.Background(), eff, ho.Guard(call))
		if err != nil || !r2.Replayed || string(r2.Value) != string(res.Value) {
			t.Fatalf("duplicate = %+v, %v", r2, err)
		}
	}
}

// flakyLedgerStore and flakyFenceStore fail writes at random: refused
// before they apply, or applied with the answer lost.
type flaky struct {
	mu  sync.Mutex
	rnd *rand.Rand
	p   float64
}

// roll returns 0 (no fault), 1 (fail before the write) or 2 (apply, lose
// the answer).
func (f *flaky) roll() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	x := f.rnd.Float64()
	switch {
	case x < f.p/2:
		return 1
	case x < f.p:
		return 2
	}
	return 0
}

type flakyLedgerStore struct {
	ledger.Store
	f *flaky
}

func (s flakyLedgerStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	r := s.f.roll()
	if r == 1 {
		return false, nil, errLost
	}
	won, cur, err := s.Store.Create(ctx, rec, now)
	if r == 2 {
		return false, nil, errLost
	}
	return won, cur, err
}

func (s flakyLedgerStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	r := s.f.roll()
	if r == 1 {
		return false, nil, errLost
	}
	ok, cur, err := s.Store.Replace(ctx, next, want, now)
	if r == 2 {
		return false, nil, errLost
	}
	return ok, cur, err
}

type flakyFenceStore struct {
	fence.Store
	f *flaky
}

func (s flakyFenceStore) Acquire(ctx context.Context, id string, seed uint64, now, exp time.Time) (uint64, *fence.Passed, error) {
	r := s.f.roll()
	if r == 1 {
		return 0, nil, errLost
	}
	tok, p, err := s.Store.Acquire(ctx, id, seed, now, exp)
	if r == 2 {
		return 0, nil, errLost
	}
	return tok, p, err
}

func (s flakyFenceStore) Pass(ctx context.Context, id string, tok uint64, region string, now time.Time) (bool, *fence.Item, error) {
	r := s.f.roll()
	if r == 1 {
		return false, nil, errLost
	}
	ok, cur, err := s.Store.Pass(ctx, id, tok, region, now)
	if r == 2 {
		return false, nil, errLost
	}
	return ok, cur, err
}

func (s flakyFenceStore) Reopen(ctx context.Context, id string, tok uint64) (bool, *fence.Item, error) {
	r := s.f.roll()
	if r == 1 {
		return false, nil, errLost
	}
	ok, cur, err := s.Store.Reopen(ctx, id, tok)
	if r == 2 {
		return false, nil, errLost
	}
	return ok, cur, err
}

func (s flakyFenceStore) Keep(ctx context.Context, id string, tok uint64, now, exp time.Time) (bool, error) {
	r := s.f.roll()
	if r == 1 {
		return false, errLost
	}
	ok, err := s.Store.Keep(ctx, id, tok, now, exp)
	if r == 2 {
		return false, errLost
	}
	return ok, err
}

// TestFencedParallelExecutorsUnderFaults: parallel executors of one fenced
// effect, each of whose ledger and fence writes fail at random (before
// applying, or applied with the answer lost), some of whose effect
// functions say the call never left (NotSent) or did not tell (Uncertain)
// or die right after the provider call, while the clock runs past leases:
// the provider is called at most once, and every executor that gets the
// outcome gets the same one.
func TestFencedParallelExecutorsUnderFaults(t *testing.T) {
	for seed := int64(1); seed <= 60; seed++ {
		fencedStress(t, seed)
	}
}

func fencedStress(t *testing.T, seed int64) {
	clk := ledgertest.NewClock(t0)
	fences := fencemem.New()
	store := memstore.New()
	f := &flaky{rnd: rand.New(rand.NewSource(seed)), p: 0.25}
	var mu sync.Mutex
	calls := 0
	const lease = 30 * time.Second
	eff := effect(t, fmt.Sprintf("stress-%d", seed))
	var wg sync.WaitGroup
	results := make(chan string, 64)
	for e := 0; e < 4; e++ {
		o, err := fence.New(fence.Config{Store: flakyFenceStore{Store: fences, f: f}, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: flakyLedgerStore{Store: store, f: f}, Lease: lease, Wait: -1, Fencer: o,
			Heartbeat: -1, MaxAttempts: 20,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				res, err := l.Do(context.Background(), eff, o.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
					switch f.roll() {
					case 1:
						return nil, ledger.NotSent(errors.New("connection refused"))
					case 2:
						mu.Lock()
						calls++
						mu.Unlock()
						if f.roll() != 0 {
							runtime.Goexit() // died after the provider call
						}
						return nil, ledger.Uncertain(errors.New("timeout"))
					}
					mu.Lock()
					calls++
					mu.Unlock()
					return []byte("ch_1"), nil
				}))
				if err == nil {
					results <- string(res.Value)
					return
				}
				if errors.Is(err, fence.ErrIssued) {
					return
				}
				clk.Advance(time.Duration(f.roll()) * lease / 2)
			}
		}()
	}
	wg.Wait()
	close(results)
	if calls > 1 {
		t.Fatalf("seed %d: the provider was called %d times", seed, calls)
	}
	for v := range results {
		if v != "ch_1" {
			t.Fatalf("seed %d: an executor got %q", seed, v)
		}
	}
}
