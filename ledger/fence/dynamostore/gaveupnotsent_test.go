package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
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

// renewalFaults fails every lease renewal (a write from firing to firing)
// while armed, reporting each on renewed; other writes pass.
type renewalFaults struct {
	ledger.Store
	armed   atomic.Bool
	renewed chan error
}

var errRenewal = errors.New("injected: the effects table does not answer")

func (s *renewalFaults) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if want.State != ledger.StateFiring || next.State != ledger.StateFiring {
		return s.Store.Replace(ctx, next, want, now)
	}
	if s.armed.Load() {
		s.renewed <- errRenewal
		return false, nil, errRenewal
	}
	ok, cur, err := s.Store.Replace(ctx, next, want, now)
	s.renewed <- err
	return ok, cur, err
}

// A fenced effect whose heartbeat gave up (its renewals failing until the
// lease could end) while its function had passed the fence but not yet
// sent the request (waiting on a connection, a rate limiter) returns
// NotSent: nothing left. That verdict is recorded (the attempt released,
// unfired), and the next Do reopens the pass that attempt's token holds
// and fires, once. Before (RED_TEAM 535), no error returned after the
// give-up was recorded: the attempt was left firing, reclaimed after its
// lease as escaped, and every later Do was refused by the pass of its
// token (ErrPassHeld) for as long as the fence keeps it, until an operator
// settled as not delivered an effect that never left.
func TestNotSentAfterTheHeartbeatGaveUpIsRecorded(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		clk := ledgertest.NewClock(time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC))
		tk := ledgertest.NewTicker()
		effects, err := ledgerdyn.New(ledgerdyn.Config{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "EffectsTable")})
		if err != nil {
			t.Fatal(err)
		}
		st := &renewalFaults{Store: effects, renewed: make(chan error, 4)}
		owner, err := fence.New(fence.Config{Store: newStore(t, e.Client(dynamotest.FastRetries), e.CreateTable(t, "FenceTable")), Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: st, Fencer: owner, Lease: 30 * time.Second, Heartbeat: 10 * time.Second, Wait: -1,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now, NewTickerFunc: tk.New}}})
		if err != nil {
			t.Fatal(err)
		}
		id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "gave-up-not-sent"})
		if err != nil {
			t.Fatal(err)
		}
		eff := ledger.Effect{Identity: id}
		var sent atomic.Int32
		started := make(chan struct{})
		waiting := owner.Guard(func(ctx context.Context, _ ledger.Call) ([]byte, error) {
			close(started)
			<-ctx.Done() // waiting for a connection when the heartbeat gives up
			return nil, ledger.NotSent(fmt.Errorf("no connection before the context ended: %w", context.Cause(ctx)))
		})
		done := make(chan error, 1)
		go func() {
			_, err := l.Do(context.Background(), eff, waiting)
			done <- err
		}()
		<-started
		st.armed.Store(true)
		for i := range 2 {
			clk.Advance(10 * time.Second)
			tk.Tick()
			if err := <-st.renewed; !errors.Is(err, errRenewal) {
				t.Fatalf("renewal %d: %v", i+1, err)
			}
		}
		err = <-done
		if !errors.Is(err, ledger.ErrNotSent) {
			t.Fatalf("Do whose heartbeat gave up, its function not sent: %v; want the recorded not sent", err)
		}
		st.armed.Store(false)
		clk.Advance(20 * time.Second) // past the lease of the fire
		r, err := l.Do(context.Background(), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
			sent.Add(1)
			return []byte("charged"), nil
		}))
		if err != nil || r.Replayed || r.Attempt != 2 || sent.Load() != 1 {
			t.Fatalf("the next Do: %+v %v, sent %d; want attempt 2 sent once", r, err, sent.Load())
		}
		rec, err := l.Lookup(context.Background(), id.EffectID)
		if err != nil || rec == nil {
			t.Fatalf("record: %v %v", rec, err)
		}
		if a := rec.Attempts[0]; a.State != ledger.AttemptReleased {
			t.Fatalf("attempt 1: %s; want released (nothing left)", a.State)
		}
	})
}
