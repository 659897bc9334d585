package fence_test

import (
	"context"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// stalledPass holds the first Pass until released: the executor stalls
// between its fire mark and its point-of-no-return write.
type stalledPass struct {
	fence.Store
	hook func()
}

func (s *stalledPass) Pass(ctx context.Context, id string, tok uint64, region string, now time.Time) (bool, *fence.Item, error) {
	s.hook()
	return s.Store.Pass(ctx, id, tok, region, now)
}

// An executor stalls after its fire mark, before its pass, past its lease;
// an operator finds the escaped effect not delivered (nothing reached the
// provider) and resolves it so. The stalled executor's late pass is then
// refused: its token was the one the resolution settled. Were it let
// through, it would reach the provider while the record says its attempt
// was settled and nothing escaped since, so the next attempts would be
// refused by its pass, the effect shown pending, and a grant of one more
// attempt (which that view makes true by construction) fire it again.
func TestResolvedAttemptsLatePassRefused(t *testing.T) {
	w := newWorld(t)
	eff := effect(t, "order-resolved-stalled")
	stalled, release := make(chan struct{}), make(chan struct{})
	fs := &stalledPass{Store: w.fences, hook: stallOnce(stalled, release)}
	owner, err := fence.New(fence.Config{Store: fs, Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, MaxAttempts: 2,
		Heartbeat: -1, Fencer: owner, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	call := owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
		return w.prov.Call(ctx, c.ProviderKey, "charge 10 EUR")
	})
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := l.Do(ctx, eff, call)
		first <- err
	}()
	<-stalled
	w.clock.Advance(time.Minute) // the stalled executor's lease ends
	v, err := l.ShowEffect(ctx, eff.Identity.EffectID)
	if err != nil || v.State != ledger.EffectEscaped {
		t.Fatalf("ShowEffect = %+v, %v; want escaped", v, err)
	}
	if w.prov.Requests() != 0 {
		t.Fatal("the provider was called before the pass")
	}
	if _, err := l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	close(release)
	if err := <-first; err == nil {
		t.Fatal("the stalled executor's attempt succeeded after its resolution")
	}
	for i := 0; i < 4 && w.prov.Requests() <= 1; i++ {
		w.clock.Advance(time.Minute)
		res, err := l.Do(ctx, eff, call)
		if err == nil {
			if w.prov.Requests() != 1 {
				t.Fatalf("Do = %+v with %d provider calls", res, w.prov.Requests())
			}
			continue
		}
		t.Logf("Do %d: %v", i, err)
		// An operator grants one more attempt to an effect shown pending
		// with its attempts exhausted, as the CLI offers.
		if v, err := l.ShowEffect(ctx, eff.Identity.EffectID); err == nil && v.State == ledger.EffectPending && v.Exhausted {
			if _, err := l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); err != nil {
				t.Logf("grant: %v", err)
			}
		}
	}
	if n := w.prov.Requests(); n != 1 {
		t.Fatalf("the provider was called %d times, want 1", n)
	}
	if _, err := l.Do(ctx, eff, call); err != nil {
		t.Fatalf("the run never learned the outcome: %v", err)
	}
}
