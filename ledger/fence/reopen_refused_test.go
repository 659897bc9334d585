package fence_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// reopenFirst is a fence store whose Reopen first runs before (once).
type reopenFirst struct {
	*fencemem.Store
	before func()
}

func (s *reopenFirst) Reopen(ctx context.Context, id string, tok uint64) (bool, *fence.Item, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.Store.Reopen(ctx, id, tok)
}

// A not-delivered resolution of a fenced effect reopens the fence before
// it writes its row; when that write is then refused (a try of the run
// changed the record meanwhile), the operator is told both: the effect
// changed (ErrChanged: show it again), and the fence was reopened
// (ErrFenceReopened): the effect's next try fires it once, as the
// resolution would have, and it does.
func TestRefusedResolutionSaysTheFenceWasReopened(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	fs := &reopenFirst{Store: fencemem.New()}
	owner, err := fence.New(fence.Config{Store: fs, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Fencer: owner, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	eff := effect(t, "order-resolve-refused")
	var calls atomic.Int32
	fn := owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		calls.Add(1)
		return nil, ledger.Uncertain(errors.New("timeout after the request was sent"))
	})
	ctx := context.Background()
	if _, err := l.Do(ctx, eff, fn); err == nil {
		t.Fatal("an uncertain call succeeded")
	}
	v, err := l.ShowEffect(ctx, eff.Identity.EffectID)
	if err != nil || v.State != ledger.EffectEscaped {
		t.Fatalf("view %s (%v), want escaped", v.State, err)
	}
	fs.before = func() { _, _ = l.Do(ctx, eff, fn) } // a try of the run, refused by the fence
	_, err = l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev})
	if !errors.Is(err, ledger.ErrChanged) || !errors.Is(err, ledger.ErrFenceReopened) {
		t.Fatalf("resolution refused after the fence was reopened: %v; want ErrChanged and ErrFenceReopened", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("provider calls %d before the next try, want 1", calls.Load())
	}
	if _, err := l.Do(ctx, eff, fn); calls.Load() != 2 {
		t.Fatalf("the next try: %v, provider calls %d; want it fired once, as ErrFenceReopened says", err, calls.Load())
	}
}
