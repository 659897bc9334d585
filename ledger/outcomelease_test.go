package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// heldOutcomeStore holds the first outcome write (a Replace to completed)
// until its context ends, as a throttled store would, and reports the
// write's deadline and whether it is in flight.
type heldOutcomeStore struct {
	ledger.Store
	held     atomic.Bool
	writing  atomic.Bool
	deadline chan time.Duration // the held write's time left when it started
}

func (s *heldOutcomeStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if next.State != ledger.StateCompleted || !s.held.CompareAndSwap(false, true) {
		return s.Store.Replace(ctx, next, want, now)
	}
	s.writing.Store(true)
	defer s.writing.Store(false)
	d, ok := ctx.Deadline()
	if !ok {
		s.deadline <- -1
		return false, nil, errors.New("outcome write without a deadline")
	}
	s.deadline <- time.Until(d)
	<-ctx.Done()
	return s.Store.Replace(ctx, next, want, now)
}

// An outcome write slower than what is left of the lease: the lease is 5 s,
// the provider call takes 4 s of it, and the store holds the outcome write
// until its deadline. Before, that deadline was Config.OutcomeTimeout
// (10 s) from the write's start, past the lease end: another executor
// reclaimed the attempt at the lease end and called the provider again
// while the first's write was still in flight, the first's success then
// refused (ErrLeaseLost). Now the write is given up by the renewal margin
// before the lease end, the first caller gets ErrOutcomeNotRecorded, and a
// second call, the documented fate of an unwritten outcome, comes only
// once no write of the first is in flight.
func TestOutcomeWriteNeverOutlastsTheLease(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC))
	st := &heldOutcomeStore{Store: memstore.New(), deadline: make(chan time.Duration, 1)}
	const lease, heartbeat = 5 * time.Second, 3 * time.Second
	cfg := ledger.Config{Store: st, Lease: lease, Heartbeat: heartbeat, Wait: -1, Test: ledger.TestConfig{Clock: clk}}
	a, err := ledger.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ledger.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-slow-outcome"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id}
	ctx := context.Background()
	start := clk.Now()
	var calls atomic.Int32
	_, errA := a.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		calls.Add(1)
		clk.Advance(4 * time.Second) // the provider call takes 4 s of the lease
		return []byte("ok"), nil
	})
	left := start.Add(lease).Sub(clk.Now())
	if got := <-st.deadline; got < 0 || got > left {
		t.Fatalf("the outcome write ran under %s, past the %s left of the lease", got, left)
	}
	if !errors.Is(errA, ledger.ErrOutcomeNotRecorded) || errors.Is(errA, ledger.ErrLeaseLost) {
		t.Fatalf("first Do: %v, want ErrOutcomeNotRecorded (the outcome given up before the lease end)", errA)
	}
	clk.Advance(2 * time.Second) // past the lease end: another executor reclaims
	_, errB := b.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		calls.Add(1)
		if st.writing.Load() {
			t.Error("the provider was called again while the first outcome write was in flight")
		}
		return []byte("ok"), nil
	})
	if errB != nil {
		t.Fatalf("second Do: %v", errB)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d provider calls, want 2 (the reclaim of the unwritten outcome)", n)
	}
}
