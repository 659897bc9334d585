package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/crashpoint"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// Crash points of the ledger, each injected by name: the simulated
// executor dies there (its goroutine stops and none of its later store
// calls reach the store, as if it had been killed).
const (
	// CrashAfterClaim: the claim (or the takeover of a stalled claim) is
	// written; the provider has not been called.
	CrashAfterClaim = "after-claim"
	// CrashAfterProvider: the provider was called; the executor dies
	// before the effect function returns.
	CrashAfterProvider = "after-provider-call"
	// CrashBeforeCompletion: the effect function returned; the outcome is
	// never sent.
	CrashBeforeCompletion = "before-completion"
	// CrashDuringCompletion: the outcome is applied; the executor dies
	// before it hears the answer.
	CrashDuringCompletion = "during-completion"
	// CrashDuringRelease: the request was not sent (ledger.NotSent); the
	// release is applied and the executor dies before it hears the answer.
	CrashDuringRelease = "during-release"
)

// CrashPoints lists the crash points in the order of an effect's steps.
var CrashPoints = []string{CrashAfterClaim, CrashAfterProvider, CrashBeforeCompletion, CrashDuringCompletion, CrashDuringRelease}

// Crash phases (see package crashpoint): which attempt dies.
const (
	PhaseFirst    = crashpoint.PhaseFirst
	PhaseRetry    = crashpoint.PhaseRetry
	PhaseTakeover = crashpoint.PhaseTakeover
)

// CrashPhases lists the phases.
var CrashPhases = crashpoint.Phases

// dyingStore is one simulated executor's view of the store.
type dyingStore struct {
	ledger.Store
	*crashpoint.Process
}

func (d *dyingStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	if d.Dead() {
		return false, nil, d.Die()
	}
	won, cur, err := d.Store.Create(ctx, rec, now)
	if err == nil && won && d.Point == CrashAfterClaim {
		return false, nil, d.Die()
	}
	return won, cur, err
}

func (d *dyingStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if d.Dead() {
		return false, nil, d.Die()
	}
	completion := next.State == ledger.StateCompleted
	if completion && d.Point == CrashBeforeCompletion {
		return false, nil, d.Die()
	}
	ok, cur, err := d.Store.Replace(ctx, next, want, now)
	if err == nil && ok {
		reclaim := next.Attempt == want.Attempt+1
		if (reclaim && d.Point == CrashAfterClaim) ||
			(completion && d.Point == CrashDuringCompletion) ||
			(next.State == ledger.StateReleased && d.Point == CrashDuringRelease) {
			return false, nil, d.Die()
		}
	}
	return ok, cur, err
}

func (d *dyingStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if d.Dead() {
		return nil, d.Die()
	}
	return d.Store.Get(ctx, key)
}

func (d *dyingStore) ListByRun(ctx context.Context, runID string) ([]*ledger.Record, error) {
	if d.Dead() {
		return nil, d.Die()
	}
	return d.Store.ListByRun(ctx, runID)
}

func (d *dyingStore) AddRunRef(ctx context.Context, key, runID string, expiresAt time.Time) error {
	if d.Dead() {
		return d.Die()
	}
	return d.Store.AddRunRef(ctx, key, runID, expiresAt)
}

// crashProvider is an in-process provider that counts deliveries per
// provider key; when it honours keys, only the first delivery under a key
// performs the effect.
type crashProvider struct {
	honours    bool
	mu         sync.Mutex
	deliveries map[string]int
	effects    int
}

func (p *crashProvider) deliver(key string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deliveries[key]++
	if !p.honours || p.deliveries[key] == 1 {
		p.effects++
	}
	return []byte(`{"charge":"ch_1"}`)
}

// RunCrashMatrix runs the ledger's crash-point matrix against h's store:
// every crash point (CrashPoints) in every phase (CrashPhases), with a
// provider that honours the provider key and one that does not, each
// followed by recovery (the lease runs out on the injected clock and a
// healthy executor calls Do until it has the outcome) and a duplicate. It
// asserts:
//
//   - with the provider that honours keys, the effect happens exactly once
//     at every point, and the outcome is recorded once and returned to the
//     duplicate;
//   - with the one that does not, every delivery beyond the first is an
//     escaped attempt in the run's witness (GET /runs/{runId}/effects):
//     the witness explains every extra delivery.
func RunCrashMatrix(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("ledgertest: Harness.NewStore is required")
	}
	for _, honours := range []bool{true, false} {
		prov := "provider-honours-keys"
		if !honours {
			prov = "provider-ignores-keys"
		}
		for _, phase := range CrashPhases {
			for _, point := range CrashPoints {
				t.Run(prov+"/"+phase+"/"+point, func(t *testing.T) { crashCase(t, h, honours, phase, point) })
			}
		}
	}
}

func crashCase(t *testing.T, h Harness, honours bool, phase, point string) {
	store := h.NewStore(t)
	procs := crashpoint.NewGroup(t)
	clk := NewClock(clock.System{}.Now().UTC().Truncate(time.Millisecond))
	funcs := clk.SleepAdvances()
	const lease = 5 * time.Minute
	executor := func(s ledger.Store) *ledger.Ledger {
		l, err := ledger.New(ledger.Config{Store: s, Lease: lease, Test: ledger.TestConfig{Clock: funcs}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	n := clk.Now().UnixNano()
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: fmt.Sprintf("crash-%d", n)})
	if err != nil {
		t.Fatal(err)
	}
	runID := fmt.Sprintf("acme/run-%016d", n%1e16)
	eff := ledger.Effect{Identity: id, RunID: runID, NodeID: "charge"}
	p := &crashProvider{honours: honours, deliveries: map[string]int{}}
	// fn is the effect function of one executor: the provider call, then
	// death if told to; notSent releases without calling.
	fn := func(d *dyingStore, notSent bool) ledger.Func {
		return func(ctx context.Context, c ledger.Call) ([]byte, error) {
			if notSent {
				return nil, ledger.NotSent(errors.New("connection refused"))
			}
			v := p.deliver(c.ProviderKey)
			if d != nil && d.Point == CrashAfterProvider {
				return nil, d.Die()
			}
			return v, nil
		}
	}
	crash := func(point string) {
		procs.Crash(point, func(p *crashpoint.Process) func() {
			d := &dyingStore{Store: store, Process: p}
			l := executor(d)
			return func() { _, _ = l.Do(context.Background(), eff, fn(d, point == CrashDuringRelease)) }
		})
	}

	switch phase {
	case PhaseRetry:
		if _, err := executor(store).Do(context.Background(), eff, fn(nil, true)); !errors.Is(err, ledger.ErrNotSent) {
			t.Fatalf("the first attempt, not sent: %v", err)
		}
	case PhaseTakeover:
		crash(CrashAfterClaim)
		clk.Advance(lease + time.Minute)
	}
	crash(point)

	var first ledger.Result
	for try := 0; ; try++ {
		r, err := executor(store).Do(context.Background(), eff, fn(nil, false))
		if err == nil {
			if point == CrashDuringCompletion && !r.Replayed {
				t.Fatalf("recovery after %s fired again: %+v; the outcome applied before the executor died was not found", point, r)
			}
			first = r
			break
		}
		if point == CrashDuringRelease || point == CrashDuringCompletion {
			// The dead executor's last write applied: the record is
			// released (or completed), with no lease to wait out.
			t.Fatalf("recovery after %s: %v; the write applied before the executor died was not found", point, err)
		}
		if try == 6 {
			t.Fatalf("recovery: %v", err)
		}
		clk.Advance(lease + time.Minute)
	}
	dup, err := executor(store).Do(context.Background(), eff, fn(nil, false))
	if err != nil || !dup.Replayed || string(dup.Value) != string(first.Value) {
		t.Fatalf("the duplicate after recovery: %+v %v, want %s replayed", dup, err, first.Value)
	}

	p.mu.Lock()
	deliveries, effects := p.deliveries[first.ProviderKey], p.effects
	keys := len(p.deliveries)
	p.mu.Unlock()
	if keys != 1 {
		t.Fatalf("%d provider keys for one effect", keys)
	}
	if honours {
		if effects != 1 {
			t.Fatalf("%d effects (%d deliveries) with a provider that honours keys", effects, deliveries)
		}
		return
	}
	w, err := executor(store).Witness(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	escaped := 0
	for _, row := range w.Effects {
		if row.ProviderKey != first.ProviderKey {
			t.Fatalf("a witness row of another provider key: %+v", row)
		}
		if row.State == ledger.AttemptEscaped {
			escaped++
		}
	}
	if deliveries-1 > escaped {
		t.Fatalf("%d deliveries, %d escaped attempts in the witness %+v: an extra delivery is unexplained", deliveries, escaped, w.Effects)
	}
}
