//go:build chaos

package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdyn "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

type chaosMetrics struct {
	mu sync.Mutex
	n  map[string]int
	// where holds the line of Do that counted each escaped attempt.
	where []string
}

func (m *chaosMetrics) Count(name string, n float64, _ map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[name] += int(n)
	if name == ledger.MetricEscaped {
		m.where = append(m.where, string(debug.Stack()))
	}
}

func (m *chaosMetrics) get(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[name]
}

// reclaimStore counts the takeovers of an expired claim that the store
// reports as applied.
type reclaimStore struct {
	ledger.Store
	n atomic.Int32
}

func (s *reclaimStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	ok, cur, err := s.Store.Replace(ctx, next, want, now)
	if err == nil && ok && want.LeaseExpired {
		s.n.Add(1)
	}
	return ok, cur, err
}

// chaosFiring is one call of an effect function that reached the provider.
type chaosFiring struct {
	n           int
	providerKey string
	epoch       int64
	escaped     bool // it returned ErrUncertain
	end         time.Time
	attempt     int
	action      int
	result      string // what its Do returned
}

// history describes the firings so far (ce.mu held).
func (ce *chaosEffect) history() string {
	var b []byte
	for _, f := range ce.firings {
		b = fmt.Appendf(b, "[%d: attempt %d epoch %d action %d escaped %t ended %t Do: %.200s] ", f.n, f.attempt, f.epoch, f.action, f.escaped, !f.end.IsZero(), f.result)
	}
	return string(b)
}

// firingSlot rides in a Do's context: the clock jumps before Do was
// called (so before its claim), and the firing it made (if any).
type firingSlot struct {
	sent   int64
	firing *chaosFiring
}

type firingSlotKey struct{}

type chaosEffect struct {
	mu      sync.Mutex
	firings []*chaosFiring
	values  [][]byte // values of the Do calls that succeeded
}

// TestChaosLedger: randomized faults against ledger.Do over the DynamoDB
// effects store on a real engine, without and with the fence of
// ledger/fence on its DynamoDB store (exploratory, built only with the
// chaos tag: dynamotest.ChaosKnobs, docs/TESTING.md). Each round runs parallel duplicates of a few effects (two tenants share each
// business key) while faults are armed at random on both tables' clients;
// the effect function succeeds, fails, answers not sent or uncertain,
// panics after the provider call, jumps the clock past the lease, or calls
// the provider and then has every write of its outcome fail. Checked: every
// firing of an effect sends the same provider key, and no other effect's;
// no two firings of an effect overlap within a lease; without a fence an
// effect fires again only after an uncertain attempt or an ended lease,
// and with one it reaches the provider at most once; every success of an
// effect carries the same value, its own; after the faults stop and the
// lease ends, every effect answers for good (a fenced effect left escaped
// is refused with ErrPassHeld: operator work, documented); the escaped
// metric never counts more than the records' escaped attempts.
func TestChaosLedger(t *testing.T) {
	rounds, seed := dynamotest.ChaosKnobs()
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, fenced := range []bool{false, true} {
			name := "unfenced"
			if fenced {
				name = "fenced"
			}
			t.Run(name, func(t *testing.T) { chaosLedger(t, e, fenced, rounds, seed) })
		}
	})
}

func chaosLedger(t *testing.T, e *dynamotest.Emulator, fenced bool, rounds int, seed uint64) {
	const lease = 30 * time.Second
	r := dynamotest.NewLockedRand(seed, 0x1ed9e7)
	clk := ledgertest.NewClock(time.Now().UTC().Truncate(time.Millisecond))
	var epoch atomic.Int64
	jump := func() {
		epoch.Add(1)
		clk.Advance(lease + time.Second)
	}
	fe, ff := dynamotest.NewFaults(), dynamotest.NewFaults()
	effects, err := ledgerdyn.New(ledgerdyn.Config{Client: e.Client(fe.Middleware(), dynamotest.FastRetries), Table: e.CreateTable(t, "EffectsTable")})
	if err != nil {
		t.Fatal(err)
	}
	funcs := ledgertest.ClockFuncs{NowFunc: clk.Now, NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) {
		tk := time.NewTicker(3 * time.Millisecond)
		return tk.C, tk.Stop
	}}
	metrics := &chaosMetrics{}
	st := &reclaimStore{Store: effects}
	cfg := ledger.Config{Store: st, Lease: lease, Heartbeat: 10 * time.Second, Wait: 300 * time.Millisecond, PollInterval: 20 * time.Millisecond,
		MaxAttempts: 200, Metrics: metrics, Test: ledger.TestConfig{Clock: funcs}}
	var owner *fence.Owner
	if fenced {
		fs := newStore(t, e.Client(ff.Middleware(), dynamotest.FastRetries), e.CreateTable(t, "FenceTable"))
		if owner, err = fence.New(fence.Config{Store: fs, Now: clk.Now}); err != nil {
			t.Fatal(err)
		}
		cfg.Fencer = owner
	}
	l, err := ledger.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prov := ledgertest.NewProvider(t)
	var calm atomic.Bool
	var mu sync.Mutex
	all := map[string]*chaosEffect{}
	providerKeys := map[string]string{} // provider key -> effect id
	effectOf := func(id string) *chaosEffect {
		mu.Lock()
		defer mu.Unlock()
		if all[id] == nil {
			all[id] = &chaosEffect{}
		}
		return all[id]
	}
	var violations atomic.Int32
	fail := func(format string, a ...any) {
		violations.Add(1)
		t.Errorf(format, a...)
	}
	fnFor := func(digest string) ledger.Func {
		fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
			id := call.EffectID
			ce := effectOf(id)
			time.Sleep(time.Duration(r.IntN(10)) * time.Millisecond)
			a := r.IntN(20)
			if calm.Load() {
				a = 19
			}
			if a < 2 {
				return nil, ledger.NotSent(errors.New("chaos: not sent"))
			}
			mu.Lock()
			if other, ok := providerKeys[call.ProviderKey]; ok && other != id {
				fail("%s: provider key of effect %s", id, other)
			}
			providerKeys[call.ProviderKey] = id
			mu.Unlock()
			ce.mu.Lock()
			// f.epoch is the jumps before its Do was called (before its
			// claim); now those before it fired. A lease a jump ended was
			// taken before that jump.
			slot := ctx.Value(firingSlotKey{}).(*firingSlot)
			f := &chaosFiring{n: len(ce.firings) + 1, providerKey: call.ProviderKey, epoch: slot.sent, attempt: call.Attempt, action: a}
			slot.firing = f
			now := epoch.Load()
			for _, o := range ce.firings {
				if o.providerKey != f.providerKey {
					fail("%s: firing %d sent provider key %s, firing %d %s", id, f.n, f.providerKey, o.n, o.providerKey)
				}
				if o.end.IsZero() && o.epoch == now {
					fail("%s: firing %d while firing %d ran within its lease", id, f.n, o.n)
				}
			}
			if last := len(ce.firings); last > 0 {
				o := ce.firings[last-1]
				switch {
				case fenced:
					fail("%s: fenced effect reached the provider %d times", id, f.n)
				case !o.end.IsZero() && !o.escaped && o.epoch == now:
					fail("%s: firing %d after firing %d ended with a verdict, with no lease end between: %s", id, f.n, o.n, ce.history())
				}
			}
			ce.firings = append(ce.firings, f)
			ce.mu.Unlock()
			end := func(escaped bool) {
				ce.mu.Lock()
				f.end, f.escaped = time.Now(), escaped
				ce.mu.Unlock()
			}
			if _, err := prov.Call(ctx, call.ProviderKey, "x"); err != nil {
				end(true)
				return nil, ledger.Uncertain(err)
			}
			val := []byte(id + "#" + strconv.Itoa(f.n) + "#" + digest)
			switch {
			case a < 4:
				end(true)
				return nil, ledger.Uncertain(errors.New("chaos: no answer"))
			case a < 5:
				end(false)
				panic("chaos: effect function panics after the provider call")
			case a < 7:
				jump()
			case a < 8:
				fe.FailNext(dynamotest.AnyOp, 8, dynamotest.Throttle())
			case a < 9:
				end(false)
				return nil, errors.New("chaos: declined")
			case a < 12:
				if r.IntN(2) == 0 {
					dynamotest.ArmRandomFault(r, fe)
				} else {
					dynamotest.ArmRandomFault(r, ff)
				}
			}
			end(false)
			return val, nil
		}
		if fenced {
			fn = owner.Guard(fn)
		}
		return fn
	}
	do := func(eff ledger.Effect) (res ledger.Result, err error) {
		slot := &firingSlot{sent: epoch.Load()}
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), firingSlotKey{}, slot), 2*time.Minute)
		defer cancel()
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panicked: %v", p)
			}
			if slot.firing != nil {
				ce := effectOf(eff.Identity.EffectID)
				ce.mu.Lock()
				slot.firing.result = fmt.Sprintf("%+v %v", res, err)
				ce.mu.Unlock()
			}
		}()
		res, err = l.Do(ctx, eff, fnFor(eff.RequestDigest))
		if err == nil && !res.Resolved {
			ce := effectOf(eff.Identity.EffectID)
			if !strings.HasPrefix(string(res.Value), eff.Identity.EffectID+"#") || !strings.HasSuffix(string(res.Value), "#"+eff.RequestDigest) {
				fail("%s: value %q of another effect or request (digest %s)", eff.Identity.EffectID, res.Value, eff.RequestDigest)
			}
			ce.mu.Lock()
			ce.values = append(ce.values, res.Value)
			ce.mu.Unlock()
		}
		return res, err
	}
	tenants := []string{"acme", "globex"}
	for round := range rounds {
		calm.Store(false)
		fe.Clear()
		ff.Clear()
		var armed []string
		for range r.IntN(5) {
			if r.IntN(3) == 0 {
				armed = append(armed, "fence: "+dynamotest.ArmRandomFault(r, ff))
			} else {
				armed = append(armed, dynamotest.ArmRandomFault(r, fe))
			}
		}
		var effs []ledger.Effect
		for range 1 + r.IntN(3) {
			key := "chaos-" + strconv.FormatUint(r.Uint64(), 36)
			for _, tenant := range tenants {
				id, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: "charge", Key: key})
				if err != nil {
					t.Fatal(err)
				}
				effs = append(effs, ledger.Effect{Identity: id})
			}
		}
		var wg sync.WaitGroup
		for _, eff := range effs {
			for range 2 + r.IntN(4) {
				eff := eff
				eff.RequestDigest, eff.SemanticRecipe = "sha256:d1", "chaos-v1"
				if r.IntN(4) == 0 {
					eff.RequestDigest = "sha256:d2"
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = do(eff)
				}()
			}
		}
		wg.Wait()
		fe.Clear()
		ff.Clear()
		jump()
		calm.Store(true)
		for _, eff := range effs {
			id := eff.Identity.EffectID
			eff.SemanticRecipe = "chaos-v1"
			var res ledger.Result
			var err error
			for _, d := range []string{"sha256:d1", "sha256:d2"} {
				eff.RequestDigest = d
				if res, err = do(eff); !errors.Is(err, ledger.ErrMismatch) {
					break
				}
			}
			var failed *ledger.FailedError
			switch {
			case err == nil, errors.As(err, &failed):
			case fenced && errors.Is(err, ledger.ErrPassHeld):
			default:
				fail("%s: after the faults and the lease: %+v %v", id, res, err)
			}
			ce := effectOf(id)
			ce.mu.Lock()
			for _, v := range ce.values {
				if string(v) != string(ce.values[0]) {
					fail("%s: two values %q and %q: %s", id, ce.values[0], v, ce.history())
				}
			}
			ce.mu.Unlock()
		}
		escaped := 0
		var states []string
		for id, ce := range all {
			rec, err := l.Lookup(context.Background(), id)
			if err != nil || rec == nil {
				fail("%s: record %v %v", id, rec, err)
				continue
			}
			line := ""
			for _, a := range rec.Attempts {
				line += fmt.Sprintf(" %d:%s", a.N, a.State)
				if a.State == ledger.AttemptEscaped {
					escaped++
				}
			}
			ce.mu.Lock()
			states = append(states, fmt.Sprintf("%s state %s attempts%s firings %s", id, rec.State, line, ce.history()))
			ce.mu.Unlock()
		}
		if got, want := metrics.get(ledger.MetricReclaims), int(st.n.Load()); got != want {
			fail("round %d: %s counted %d, the store applied %d takeovers of an expired claim", round, ledger.MetricReclaims, got, want)
		}
		if got := metrics.get(ledger.MetricEscaped); got > escaped {
			for _, s := range states {
				if strings.Contains(s, "escaped") {
					t.Log(s)
				}
			}
			metrics.mu.Lock()
			for _, w := range metrics.where {
				t.Log(w)
			}
			metrics.mu.Unlock()
			fail("round %d: %s counted %d, the records hold %d escaped attempts", round, ledger.MetricEscaped, got, escaped)
		}
		if violations.Load() > 0 {
			t.Fatalf("round %d (seed %d, faults armed %v): %d violations", round, seed, armed, violations.Load())
		}
	}
	firings := 0
	for _, ce := range all {
		firings += len(ce.firings)
	}
	t.Logf("%s: %d rounds, %d effects, %d firings, %d provider effects, faults fired %d/%d, reclaims %d, escaped %d",
		e.Kind, rounds, len(all), firings, prov.Effects(), fe.Fired(), ff.Fired(), metrics.get(ledger.MetricReclaims), metrics.get(ledger.MetricEscaped))
}
