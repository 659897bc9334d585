package fence_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

var t0 = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

// region is one region's executor: its own ledger replica (a separate store:
// the worst case of an MREC global table, a partition that replicates
// nothing) and the shared, linearizable fence owner.
type region struct {
	name   string
	ledger *ledger.Ledger
	store  *memstore.Store
	owner  *fence.Owner
}

type world struct {
	clock   *ledgertest.Clock
	fences  *fencemem.Store
	prov    *ledgertest.Provider
	metrics *bytes.Buffer
	rec     *emf.Recorder
}

func newWorld(t *testing.T) *world {
	w := &world{clock: ledgertest.NewClock(t0), fences: fencemem.New(), prov: ledgertest.NewProvider(t), metrics: &bytes.Buffer{}}
	w.rec = emf.New(w.metrics, "idemkit")
	return w
}

func (w *world) region(t *testing.T, name string, fencer func(*fence.Owner) ledger.Fencer) *region {
	owner, err := fence.New(fence.Config{Store: w.fences, Region: name, Now: w.clock.Now, Metrics: w.rec})
	if err != nil {
		t.Fatal(err)
	}
	var f ledger.Fencer = owner
	if fencer != nil {
		f = fencer(owner)
	}
	st := memstore.New()
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: f, Metrics: w.rec})
	if err != nil {
		t.Fatal(err)
	}
	return &region{name: name, ledger: l, store: st, owner: owner}
}

func (w *world) staleCount() int {
	return strings.Count(w.metrics.String(), `"`+fence.MetricStaleFence+`":1`)
}

func effect(t *testing.T, key string) ledger.Effect {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Effect{Identity: id}
}

func (w *world) call(r *region) ledger.Func {
	return r.owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
		return w.prov.Call(ctx, c.ProviderKey, "charge 10 EUR")
	})
}

// hookFencer runs after() between taking a token and returning it: the
// executor stalls after its fence verdict and before its fire mark.
type hookFencer struct {
	*fence.Owner
	after func()
}

func (h hookFencer) Token(ctx context.Context, id string) (uint64, error) {
	tok, err := h.Owner.Token(ctx, id)
	h.after()
	return tok, err
}

// stallOnce returns a hook that, the first time only, signals stalled and
// waits for release.
func stallOnce(stalled, release chan struct{}) func() {
	var once sync.Once
	return func() { once.Do(func() { close(stalled); <-release }) }
}

// Under a partition the same effect is claimed in both regions (each wins
// its local claim); the stale owner's effect is rejected at the point of no
// return and the provider sees exactly one call.
func TestPartitionStaleOwnerRejected(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-1")
	release := make(chan struct{})
	stalled := make(chan struct{})
	eu := w.region(t, "eu-west-1", func(o *fence.Owner) ledger.Fencer {
		return hookFencer{o, stallOnce(stalled, release)}
	})
	us := w.region(t, "us-east-1", nil)

	var euErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, euErr = eu.ledger.Do(context.Background(), eff, w.call(eu))
	}()
	<-stalled // eu holds token 1, not yet fired
	res, err := us.ledger.Do(context.Background(), eff, w.call(us))
	if err != nil || res.Replayed {
		t.Fatalf("us Do = %+v, %v", res, err)
	}
	close(release)
	<-done
	if !errors.Is(euErr, fence.ErrStale) || !errors.Is(euErr, ledger.ErrStaleFence) || !errors.Is(euErr, ledger.ErrNotSent) {
		t.Fatalf("stale owner's Do error = %v, want ErrStale (not sent)", euErr)
	}
	if got := w.prov.Requests(); got != 1 {
		t.Fatalf("provider saw %d calls, want exactly 1", got)
	}
	if got := w.staleCount(); got != 1 {
		t.Fatalf("%s counted %d times, want 1:\n%s", fence.MetricStaleFence, got, w.metrics)
	}
	// The stale attempt was released, not escaped: it never reached the provider.
	rec, _ := eu.ledger.Lookup(context.Background(), eff.Identity.EffectID)
	if rec == nil || rec.State != ledger.StateReleased || rec.Attempts[0].State != ledger.AttemptReleased {
		t.Fatalf("eu record = %+v", rec)
	}
	// A later attempt in eu is refused a token: the effect was issued.
	_, err = eu.ledger.Do(context.Background(), eff, w.call(eu))
	var issued *fence.IssuedError
	if !errors.As(err, &issued) || issued.Region != "us-east-1" {
		t.Fatalf("later eu Do = %v, want *IssuedError from us-east-1", err)
	}
	if w.prov.Requests() != 1 {
		t.Fatal("a later attempt reached the provider")
	}
}

// The same hazard without the fence (reconciled-records): both partitioned
// regions fire. Only a provider that deduplicates on the stable key keeps
// it to one effect; that is why such effects are at-least-once-risk.
func TestPartitionUnfencedFiresTwice(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-2")
	var ls []*ledger.Ledger
	for range 2 {
		l, err := ledger.New(ledger.Config{Store: memstore.New(), Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	for _, l := range ls {
		if _, err := l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
			return w.prov.Call(ctx, c.ProviderKey, "x")
		}); err != nil {
			t.Fatal(err)
		}
	}
	if w.prov.Requests() != 2 || w.prov.Effects() != 1 {
		t.Fatalf("requests=%d effects=%d; want 2 requests deduplicated to 1 effect", w.prov.Requests(), w.prov.Effects())
	}
	if fence.Classify(fence.ReconciledRecords, false) != fence.AtLeastOnceRisk ||
		fence.Classify(fence.ReconciledRecords, true) != fence.ExactlyOnce ||
		fence.Classify(fence.FencedEffects, false) != fence.ExactlyOnce {
		t.Fatal("Classify")
	}
}

// 16 executors in each of two partitioned regions race on one effect: the
// provider sees exactly one call; every loser is told why.
func TestRacingRegionsOneCall(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-3")
	regions := []*region{w.region(t, "eu-west-1", nil), w.region(t, "us-east-1", nil)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 32 {
		r := regions[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.ledger.Do(context.Background(), eff, w.call(r))
			kind := "fired"
			switch {
			case err == nil && res.Replayed:
				kind = "replayed"
			case err == nil:
			case errors.Is(err, fence.ErrStale):
				kind = "stale"
			case errors.Is(err, fence.ErrIssued):
				kind = "issued"
			case errors.Is(err, ledger.ErrInFlight):
				kind = "in-flight"
			default:
				t.Errorf("unexpected error: %v", err)
			}
			mu.Lock()
			outcomes[kind]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if w.prov.Requests() != 1 || outcomes["fired"] != 1 {
		t.Fatalf("provider calls=%d outcomes=%v; want exactly one fire", w.prov.Requests(), outcomes)
	}
}

// A stalled owner whose lease expired in the SAME region: the reclaimer takes
// a newer token and fires; the stalled owner can no longer fire.
func TestLeaseExpiryStalledOwner(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-4")
	release, stalled := make(chan struct{}), make(chan struct{})
	shared := memstore.New()
	mk := func(f ledger.Fencer) *ledger.Ledger {
		l, err := ledger.New(ledger.Config{Store: shared, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: f})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	owner, _ := fence.New(fence.Config{Store: w.fences, Now: w.clock.Now, Metrics: w.rec})
	stallA := mk(hookFencer{owner, stallOnce(stalled, release)})
	b := mk(owner)
	call := owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) { return w.prov.Call(ctx, c.ProviderKey, "x") })
	var aErr error
	done := make(chan struct{})
	go func() { defer close(done); _, aErr = stallA.Do(context.Background(), eff, call) }()
	<-stalled
	w.clock.Advance(time.Minute) // A's lease expires (or B's clock runs ahead)
	if _, err := b.Do(context.Background(), eff, call); err != nil {
		t.Fatalf("reclaimer: %v", err)
	}
	close(release)
	<-done
	if aErr == nil || w.prov.Requests() != 1 {
		t.Fatalf("stalled owner: err=%v provider calls=%d; want refused and exactly 1 call", aErr, w.prov.Requests())
	}
}

// An executor that passed the point of no return and crashed before firing
// leaves the effect issued: no later attempt, in any region, fires it.
func TestCrashAfterPointOfNoReturn(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-5")
	eu := w.region(t, "eu-west-1", nil)
	_, err := eu.ledger.Do(context.Background(), eff, eu.owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("crashed mid-call"))
	}))
	if !errors.Is(err, ledger.ErrUncertain) {
		t.Fatal(err)
	}
	us := w.region(t, "us-east-1", nil)
	for _, r := range []*region{eu, us} {
		w.clock.Advance(time.Minute)
		if _, err := r.ledger.Do(context.Background(), eff, w.call(r)); !errors.Is(err, fence.ErrIssued) {
			t.Fatalf("%s: later Do = %v, want ErrIssued", r.name, err)
		}
	}
	if w.prov.Requests() != 0 {
		t.Fatal("an issued effect was fired again")
	}
}

// failingStore fails the next n operations of the fence store.
type failingStore struct {
	fence.Store
	mu          sync.Mutex
	failAcquire int
	failPass    int
}

var errInjected = errors.New("injected: fence owner unreachable")

func (s *failingStore) Acquire(ctx context.Context, id string, seed uint64, now, exp time.Time) (uint64, *fence.Passed, error) {
	s.mu.Lock()
	fail := s.failAcquire > 0
	s.failAcquire--
	s.mu.Unlock()
	if fail {
		return 0, nil, errInjected
	}
	return s.Store.Acquire(ctx, id, seed, now, exp)
}

func (s *failingStore) Pass(ctx context.Context, id string, tok uint64, region string, now time.Time) (bool, *fence.Item, error) {
	s.mu.Lock()
	fail := s.failPass > 0
	s.failPass--
	s.mu.Unlock()
	if fail {
		return false, nil, errInjected
	}
	return s.Store.Pass(ctx, id, tok, region, now)
}

// An unreachable fence owner (a partitioned region) never leads to a fire;
// the attempt is released and a later attempt fires once.
func TestUnreachableFenceNeverFires(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-6")
	fs := &failingStore{Store: w.fences, failAcquire: 1, failPass: 1}
	owner, err := fence.New(fence.Config{Store: fs, Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: owner})
	if err != nil {
		t.Fatal(err)
	}
	call := owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) { return w.prov.Call(ctx, c.ProviderKey, "x") })
	for i := range 2 { // token refused, then pass refused
		if _, err := l.Do(context.Background(), eff, call); !errors.Is(err, errInjected) {
			t.Fatalf("attempt %d: %v, want the injected error", i, err)
		}
		if w.prov.Requests() != 0 {
			t.Fatal("fired without the fence")
		}
	}
	res, err := l.Do(context.Background(), eff, call)
	if err != nil || w.prov.Requests() != 1 {
		t.Fatalf("after recovery: %+v %v, provider calls %d", res, err, w.prov.Requests())
	}
	res, err = l.Do(context.Background(), eff, call)
	if err != nil || !res.Replayed || w.prov.Requests() != 1 {
		t.Fatalf("duplicate: %+v %v", res, err)
	}
}

func TestGuardRefusesUnfencedLedger(t *testing.T) {
	w := newWorld(t)
	owner, _ := fence.New(fence.Config{Store: w.fences})
	l, _ := ledger.New(ledger.Config{Store: memstore.New(), Wait: -1})
	_, err := l.Do(context.Background(), effect(t, "order-7"), owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		t.Fatal("fired without a token")
		return nil, nil
	}))
	if !errors.Is(err, fence.ErrUnfenced) {
		t.Fatalf("err = %v, want ErrUnfenced", err)
	}
}

func TestConfig(t *testing.T) {
	if _, err := fence.New(fence.Config{}); err == nil {
		t.Fatal("missing store accepted")
	}
	if _, err := fence.New(fence.Config{Store: fencemem.New(), Retention: time.Hour}); err == nil {
		t.Fatal("retention below 14 days accepted")
	}
	for _, c := range []fence.CrossRegion{fence.SingleRegion, fence.ReconciledRecords, fence.FencedEffects} {
		if !c.Valid() {
			t.Fatal(c)
		}
	}
	if fence.CrossRegion("strict").Valid() {
		t.Fatal("removed vocabulary accepted")
	}
}

// An escaped effect whose token passed stays unfired for as long as its
// effect record is kept: every Do that finds it refused keeps the record
// (a reclaim extends its retention), so the fence item that says the token
// passed is kept as long (a refused token extends it too). Here with the
// defaults (fence 15 days after its last token, ledger 14 days after its
// last write: the record, extended by a refused Do on day 13, outlived the
// fence item, and a Do on day 16 fired) and with a longer ledger
// retention; a ledger kept longer than its fence is a config error
// (TestLedgerRetentionLongerThanTheFenceRefused).
func TestEscapedStaysIssuedWhileItsRecordIsKept(t *testing.T) {
	for _, tc := range []struct {
		name            string
		ledgerRetention time.Duration
		asks            []time.Duration // Do calls, after the escape
	}{
		{"defaults, asked again before the record ends", 0, []time.Duration{13 * 24 * time.Hour, 16 * 24 * time.Hour, 26 * 24 * time.Hour}},
		{"ledger retention of 30 days, fence 31", 30 * 24 * time.Hour, []time.Duration{20 * 24 * time.Hour, 29 * 24 * time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			eff := effect(t, "order-escaped")
			owner, err := fence.New(fence.Config{Store: w.fences, Region: "eu-west-1", Now: w.clock.Now,
				Retention: max(fence.DefaultRetention, tc.ledgerRetention+24*time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			st := memstore.New()
			l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Retention: tc.ledgerRetention,
				Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: owner})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Do(context.Background(), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
				return nil, ledger.Uncertain(errors.New("crashed mid-call"))
			}))
			if !errors.Is(err, ledger.ErrUncertain) {
				t.Fatal(err)
			}
			start := w.clock.Now()
			for _, at := range tc.asks {
				w.clock.Set(start.Add(at))
				rec, err := l.Lookup(context.Background(), eff.Identity.EffectID)
				if err != nil {
					t.Fatal(err)
				}
				if rec == nil {
					t.Fatalf("day %d: the effect record is gone; the test asks only while it is kept", int(at/(24*time.Hour)))
				}
				_, err = l.Do(context.Background(), eff, w.call(&region{owner: owner}))
				if w.prov.Requests() != 0 {
					t.Fatalf("day %d: an escaped effect whose token passed was fired again while its record (state %s) is kept (Do: %v)",
						int(at/(24*time.Hour)), rec.State, err)
				}
				if !errors.Is(err, fence.ErrIssued) {
					t.Fatalf("day %d: Do = %v, want ErrIssued", int(at/(24*time.Hour)), err)
				}
			}
		})
	}
}

// A ledger whose records are kept longer than its fence keeps a passed
// token would fire an escaped effect again once the fence forgot it: New
// refuses it.
func TestLedgerRetentionLongerThanTheFenceRefused(t *testing.T) {
	owner, err := fence.New(fence.Config{Store: fencemem.New()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ledger.New(ledger.Config{Store: memstore.New(), Retention: 30 * 24 * time.Hour, Fencer: owner})
	if !errors.Is(err, ledger.ErrConfig) || !strings.Contains(err.Error(), "Config.Fencer") {
		t.Fatalf("ledger.New with a 30-day retention and a 15-day fence = %v, want a config error naming Config.Fencer", err)
	}
	for _, r := range []time.Duration{0, fence.DefaultRetention} {
		if _, err := ledger.New(ledger.Config{Store: memstore.New(), Retention: r, Fencer: owner}); err != nil {
			t.Fatalf("retention %v: %v", r, err)
		}
	}
}

// An operator who finds that an escaped effect did not reach its provider
// resolves it as not delivered: the effect is released for one more
// attempt, which fires once with the same provider key, fenced like any
// other (the fence's record of the escaped attempt's pass is reopened for
// exactly that token). A resolution as delivered fires nothing.
func TestResolvedNotDeliveredFiresOnce(t *testing.T) {
	for _, as := range []ledger.Settlement{ledger.NotDelivered, ledger.Delivered} {
		t.Run(string(as), func(t *testing.T) {
			w := newWorld(t)
			eff := effect(t, "order-resolved-"+string(as))
			eu := w.region(t, "eu-west-1", nil)
			_, err := eu.ledger.Do(context.Background(), eff, eu.owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
				return nil, ledger.Uncertain(errors.New("crashed mid-call"))
			}))
			if !errors.Is(err, ledger.ErrUncertain) {
				t.Fatal(err)
			}
			w.clock.Advance(time.Minute)
			v, err := eu.ledger.ShowEffect(context.Background(), eff.Identity.EffectID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := eu.ledger.Resolve(context.Background(), eff.Identity.EffectID,
				ledger.Resolution{As: as, Operator: "ops", Rev: v.Rev}); err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			want := 0
			if as == ledger.NotDelivered {
				want = 1
			}
			for i := range 3 {
				w.clock.Advance(time.Minute)
				res, err := eu.ledger.Do(context.Background(), eff, w.call(eu))
				if w.prov.Requests() != want {
					t.Fatalf("Do %d after the resolution: %+v %v; provider calls %d, want %d", i, res, err, w.prov.Requests(), want)
				}
				if err != nil {
					t.Fatalf("Do %d after the resolution: %v", i, err)
				}
			}
		})
	}
}

// lostPass applies the next Pass and loses its answer (every retry too).
type lostPass struct {
	fence.Store
	lose bool
}

func (s *lostPass) Pass(ctx context.Context, id string, tok uint64, region string, now time.Time) (bool, *fence.Item, error) {
	ok, cur, err := s.Store.Pass(ctx, id, tok, region, now)
	if s.lose {
		s.lose = false
		return false, nil, errInjected
	}
	return ok, cur, err
}

// An attempt that did not reach the provider after its token passed the
// fence (its function said so with ledger.NotSent: a refused connection;
// or the point-of-no-return write applied and its answer was lost, so the
// function was not called) is released for another attempt, and the fence
// lets that one fire: the pass of a token whose attempt was not sent does
// not stop the effect. An escaped attempt's pass still does
// (TestCrashAfterPointOfNoReturn).
func TestNotSentAfterThePassFiresLater(t *testing.T) {
	for _, tc := range []string{"function not sent", "pass answer lost"} {
		t.Run(tc, func(t *testing.T) {
			w := newWorld(t)
			eff := effect(t, "order-not-sent")
			fs := &lostPass{Store: w.fences, lose: tc == "pass answer lost"}
			owner, err := fence.New(fence.Config{Store: fs, Now: w.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1,
				Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: owner})
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Do(context.Background(), eff, owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
				if tc == "pass answer lost" {
					return w.prov.Call(ctx, c.ProviderKey, "charge 10 EUR")
				}
				return nil, ledger.NotSent(errors.New("connection refused"))
			}))
			if !errors.Is(err, ledger.ErrNotSent) || w.prov.Requests() != 0 {
				t.Fatalf("first attempt: %v, provider calls %d", err, w.prov.Requests())
			}
			if it, _ := w.fences.Get(context.Background(), eff.Identity.EffectID); it == nil || it.Passed == nil {
				t.Fatalf("the first attempt's token did not pass: %+v", it)
			}
			call := owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
				return w.prov.Call(ctx, c.ProviderKey, "charge 10 EUR")
			})
			for i := range 3 {
				w.clock.Advance(time.Minute)
				res, err := l.Do(context.Background(), eff, call)
				if err != nil || w.prov.Requests() != 1 {
					t.Fatalf("Do %d after a not-sent attempt: %+v %v; provider calls %d, want 1", i, res, err, w.prov.Requests())
				}
			}
		})
	}
}

// failingFencer fails Token while fail is set, as a fence table that is
// throttled or unreachable does, or an executor that stops between its
// claim and its token.
type failingFencer struct {
	*fence.Owner
	fail *bool
}

func (f failingFencer) Token(ctx context.Context, id string) (uint64, error) {
	if *f.fail {
		return 0, errors.New("fence table unreachable")
	}
	return f.Owner.Token(ctx, id)
}

// A Do that claims an escaped effect but cannot reach the fence (its
// Token fails, or it stops before asking) must not keep the effect record
// longer than the fence keeps the escaped attempt's pass: else once the
// fence item ends, a Do while the record is still kept takes a token
// afresh and fires the escaped effect again. With the defaults (14-day
// records, a 15-day fence): escape on day 0, a Do on day 13 whose Token
// fails, a Do on day 16.
func TestEscapedStaysIssuedWhenAClaimCannotReachTheFence(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-escaped-unreached")
	owner, err := fence.New(fence.Config{Store: w.fences, Region: "eu-west-1", Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	fail := false
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: failingFencer{owner, &fail}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Do(context.Background(), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("crashed mid-call"))
	}))
	if !errors.Is(err, ledger.ErrUncertain) {
		t.Fatal(err)
	}
	start := w.clock.Now()
	day := 24 * time.Hour
	w.clock.Set(start.Add(13 * day))
	fail = true
	if _, err := l.Do(context.Background(), eff, w.call(&region{owner: owner})); err == nil {
		t.Fatal("Do with the fence unreachable succeeded")
	}
	fail = false
	for _, at := range []time.Duration{16 * day, 20 * day} {
		w.clock.Set(start.Add(at))
		rec, err := l.Lookup(context.Background(), eff.Identity.EffectID)
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			continue // the record ended: the effect is a new one
		}
		_, err = l.Do(context.Background(), eff, w.call(&region{owner: owner}))
		if w.prov.Requests() != 0 {
			t.Fatalf("day %d: an escaped effect whose token passed was fired again while its record (state %s, kept to day %d) is kept (Do: %v)",
				int(at/day), rec.State, int(rec.ExpiresAt.Sub(start)/day), err)
		}
		if !errors.Is(err, fence.ErrIssued) {
			t.Fatalf("day %d: Do = %v, want ErrIssued", int(at/day), err)
		}
	}
}

// keepFailing is a fence store whose retention extensions outside Acquire
// fail while fail is set, as a fence table throttled or unreachable at the
// end of a call does.
type keepFailing struct {
	*fencemem.Store
	fail  *bool
	keeps *int // Keep calls, if set
}

func (s keepFailing) Keep(ctx context.Context, id string, tok uint64, now, exp time.Time) (bool, error) {
	if s.keeps != nil {
		*s.keeps++
	}
	if *s.fail {
		return false, errors.New("fence table unreachable")
	}
	return s.Store.Keep(ctx, id, tok, now, exp)
}

// The fence item's retention counts from the token's issue, the record's
// from its last write: an escaped call that took T is written T after its
// token, so with the fence and the ledger keeping 15 days each, the record
// would be kept T past the fence item, and a Do in that window would take
// a new token and fire the escaped effect again. No record of a fenced
// escaped effect may be kept longer than the fence keeps its pass: the
// ledger asks the fence to keep it as long, and when the fence cannot be
// reached keeps the record no longer than the fence already does.
func TestEscapedStaysIssuedAfterALongCall(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name        string
		unreachable bool
	}{
		{"fence reachable at the outcome", false},
		{"fence unreachable at the outcome", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			eff := effect(t, "order-long-call")
			fail := false
			owner, err := fence.New(fence.Config{Store: keepFailing{w.fences, &fail, nil}, Region: "eu-west-1", Now: w.clock.Now,
				Retention: 15 * day})
			if err != nil {
				t.Fatal(err)
			}
			l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, Retention: 15 * day,
				Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: owner})
			if err != nil {
				t.Fatal(err)
			}
			start := w.clock.Now()
			_, err = l.Do(context.Background(), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
				w.clock.Advance(20 * time.Second)
				fail = tc.unreachable
				return nil, ledger.Uncertain(errors.New("no answer after 20 s"))
			}))
			if !errors.Is(err, ledger.ErrUncertain) {
				t.Fatal(err)
			}
			fail = false
			rec, err := l.Lookup(context.Background(), eff.Identity.EffectID)
			if err != nil || rec == nil {
				t.Fatalf("record after the outcome: %v, %v", rec, err)
			}
			it, err := w.fences.Get(context.Background(), eff.Identity.EffectID)
			if err != nil || it == nil || it.Passed == nil {
				t.Fatalf("fence item after the outcome: %+v, %v", it, err)
			}
			if rec.ExpiresAt.After(it.ExpiresAt) {
				t.Errorf("the record is kept to %s after the token, the fence item's pass only to %s", rec.ExpiresAt.Sub(start), it.ExpiresAt.Sub(start))
			}
			at := 15*day + 10*time.Second
			w.clock.Set(start.Add(at))
			if rec, err = l.Lookup(context.Background(), eff.Identity.EffectID); err != nil {
				t.Fatal(err)
			}
			if rec == nil {
				if !tc.unreachable {
					t.Fatalf("%s after the token: the record ended although the fence could keep the pass", at)
				}
				return // the record ended with the fence item: the effect is a new one
			}
			_, err = l.Do(context.Background(), eff, w.call(&region{owner: owner}))
			if w.prov.Requests() != 0 {
				t.Fatalf("%s after the token: an escaped effect whose token passed was fired again while its record (state %s, kept to %s after the token) is kept (Do: %v)",
					at, rec.State, rec.ExpiresAt.Sub(start), err)
			}
			if !errors.Is(err, fence.ErrIssued) {
				t.Fatalf("%s after the token: Do = %v, want ErrIssued", at, err)
			}
		})
	}
}

// Keeping the fence item longer costs a fence write only on the escaped
// path, and there only when the record would otherwise outlive the item:
// never on a success, and not for an escaped call shorter than the margin
// between the fence's retention and the ledger's.
func TestFenceKeptOnlyWhenTheRecordWouldOutliveIt(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name                     string
		fenceRetention           time.Duration
		wantSuccess, wantEscaped int
	}{
		{"fence a day longer than the ledger", 15 * day, 0, 0},
		{"fence as long as the ledger", 14 * day, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			fail, keeps := false, 0
			owner, err := fence.New(fence.Config{Store: keepFailing{w.fences, &fail, &keeps}, Now: w.clock.Now, Retention: tc.fenceRetention})
			if err != nil {
				t.Fatal(err)
			}
			l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1,
				Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: owner})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Do(context.Background(), effect(t, "order-ok"), owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
				w.clock.Advance(20 * time.Second)
				return []byte("ok"), nil
			})); err != nil {
				t.Fatal(err)
			}
			if keeps != tc.wantSuccess {
				t.Errorf("a success asked the fence to keep its item %d times, want %d", keeps, tc.wantSuccess)
			}
			keeps = 0
			if _, err := l.Do(context.Background(), effect(t, "order-escaped"), owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
				w.clock.Advance(20 * time.Second)
				return nil, ledger.Uncertain(errors.New("no answer"))
			})); !errors.Is(err, ledger.ErrUncertain) {
				t.Fatal(err)
			}
			if keeps != tc.wantEscaped {
				t.Errorf("an escaped call of 20 s asked the fence to keep its item %d times, want %d", keeps, tc.wantEscaped)
			}
		})
	}
}

// A heartbeat renewal keeps the record of a running attempt Retention
// from now; an executor that then stops leaves that record for a reclaim
// that marks the attempt escaped. A call running until its lease would
// outlast the fence item of its token must not leave a record kept past
// the item: the renewal asks the fence to keep the item as long as the
// record, and when the fence cannot, fails (the heartbeat gives up and
// the call's context ends before its lease) rather than keep the record
// past the item.
func TestRenewalsNeverKeepTheRecordPastTheFence(t *testing.T) {
	const day = 24 * time.Hour
	for _, tc := range []struct {
		name        string
		unreachable bool
	}{
		{"fence reachable", false},
		{"fence unreachable at the renewal", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			eff := effect(t, "order-long-renewed")
			// The fence's Keep is only asked for by a renewal whose lease
			// would outlast the fence item (the one at 15 days less 20 s,
			// or an earlier one the scheduler held until the clock had
			// moved there), so an unreachable fence fails every Keep from
			// the start: no flag changes while a renewal may read it.
			fail := tc.unreachable
			owner, err := fence.New(fence.Config{Store: keepFailing{w.fences, &fail, nil}, Now: w.clock.Now, Retention: 15 * day})
			if err != nil {
				t.Fatal(err)
			}
			ticks := make(chan time.Time)
			st := memstore.New()
			l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Heartbeat: 10 * time.Second, Wait: -1, Retention: 15 * day,
				Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now,
					NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}},
				Fencer: owner})
			if err != nil {
				t.Fatal(err)
			}
			start := w.clock.Now()
			check := func(when string) {
				t.Helper()
				rec, err := st.Get(context.Background(), "effect#"+eff.Identity.EffectID)
				if err != nil || rec == nil {
					t.Fatalf("%s: record %v, %v", when, rec, err)
				}
				it, err := w.fences.Get(context.Background(), eff.Identity.EffectID)
				if err != nil || it == nil || it.Passed == nil {
					t.Fatalf("%s: fence item %+v, %v", when, it, err)
				}
				if rec.ExpiresAt.After(it.ExpiresAt) {
					t.Errorf("%s: the record (%s) is kept to %s after the token, the fence item's pass only to %s",
						when, rec.State, rec.ExpiresAt.Sub(start), it.ExpiresAt.Sub(start))
				}
				if rec.LeaseUntil.After(rec.ExpiresAt) {
					t.Errorf("%s: the lease ends %s after the token, after the record (%s)", when, rec.LeaseUntil.Sub(start), rec.ExpiresAt.Sub(start))
				}
			}
			_, err = l.Do(context.Background(), eff, owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
				// tick hands the heartbeat a tick at the clock's time; a
				// heartbeat that gave up (its renewal read the clock
				// after a later Set) takes no more.
				tick := func() bool {
					select {
					case ticks <- w.clock.Now():
						return true
					case <-ctx.Done():
						return false
					}
				}
				for _, at := range []time.Duration{15*day - 60*time.Second, 15*day - 50*time.Second, 15*day - 40*time.Second, 15*day - 20*time.Second} {
					w.clock.Set(start.Add(at))
					if !tick() {
						break
					}
				}
				if tc.unreachable {
					<-ctx.Done() // the heartbeat gave up
					check("after the heartbeat gave up")
					return nil, context.Cause(ctx)
				}
				if !tick() { // the renewal before has landed
					t.Fatalf("the heartbeat gave up with the fence reachable: %v", context.Cause(ctx))
				}
				check("after renewals past the fence item's first end")
				return nil, ledger.Uncertain(errors.New("no answer"))
			}))
			if tc.unreachable {
				if !errors.Is(err, ledger.ErrLeaseLost) {
					t.Fatalf("Do = %v, want ErrLeaseLost", err)
				}
				return
			}
			if !errors.Is(err, ledger.ErrUncertain) {
				t.Fatalf("Do = %v, want ErrUncertain", err)
			}
			check("after the escaped outcome")
		})
	}
}

// Classify claims exactly-once only for a posture it knows to be safe
// (single-region, fenced-effects) or a provider that deduplicates on the
// stable key (RED_TEAM 506): a posture it does not know (unset, the removed
// "best-effort" and "strict", a typo) is at-least-once-risk, as
// reconciled-records is. It answered exactly-once for every posture but
// reconciled-records.
func TestClassifyClaimsExactlyOnceOnlyForAKnownSafePosture(t *testing.T) {
	for _, tc := range []struct {
		posture fence.CrossRegion
		dedups  bool
		want    fence.EffectRisk
	}{
		{fence.SingleRegion, false, fence.ExactlyOnce},
		{fence.FencedEffects, false, fence.ExactlyOnce},
		{fence.ReconciledRecords, false, fence.AtLeastOnceRisk},
		{fence.ReconciledRecords, true, fence.ExactlyOnce},
		{"", false, fence.AtLeastOnceRisk},
		{"best-effort", false, fence.AtLeastOnceRisk},
		{"strict", false, fence.AtLeastOnceRisk},
		{"Fenced-Effects", false, fence.AtLeastOnceRisk},
		{"best-effort", true, fence.ExactlyOnce},
	} {
		if got := fence.Classify(tc.posture, tc.dedups); got != tc.want {
			t.Errorf("Classify(%q, %v) = %s, want %s", tc.posture, tc.dedups, got, tc.want)
		}
	}
}
