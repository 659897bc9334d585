package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdyn "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// A fenced effect whose function passed the fence and was still calling
// the provider when its lease ran out (no heartbeat here; with one, after
// it gave up or under clock skew): another executor reclaims the attempt
// as escaped and is refused by the fence (the first attempt's pass), so
// nothing fires twice. The first function then returns its success. The
// fence proves that no other attempt passed, so that success is the
// effect's outcome: it is recorded (the first attempt completed, the
// refused one left released), the first Do returns it, and every later Do
// replays it, attempt 1. Likewise a first function that returns NotSent
// (its request never left) is recorded released, and the next Do reopens
// its token's pass and fires, once. Before (RED_TEAM 536), the write was
// refused because the record had changed hands, Do returned ErrLeaseLost,
// and the effect stayed escaped, every later Do refused by the pass
// (ErrPassHeld), until an operator settled it: as delivered, with no
// value, an outcome the executor had held; or as not delivered, an
// effect that never left.
func TestFencedSuccessAfterARefusedReclaimIsRecorded(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, answer := range []string{"success", "not-sent"} {
			t.Run(answer, func(t *testing.T) { staleOutcome(t, e, answer) })
		}
	})
}

func staleOutcome(t *testing.T, e *dynamotest.Emulator, answer string) {
	// A clock with nanoseconds, as the system's: the store keeps
	// milliseconds of what the executor wrote.
	clk := ledgertest.NewClock(time.Date(2026, 12, 7, 20, 0, 0, 123456789, time.UTC))
	effects, err := ledgerdyn.New(ledgerdyn.Config{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "EffectsTable")})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := fence.New(fence.Config{Store: newStore(t, e.Client(dynamotest.FastRetries), e.CreateTable(t, "FenceTable")), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	executor := func() *ledger.Ledger {
		l, err := ledger.New(ledger.Config{Store: effects, Fencer: owner, Lease: 30 * time.Second, Heartbeat: -1, Wait: -1,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := executor(), executor()
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "stale-" + answer})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id}
	started, answered := make(chan struct{}), make(chan struct{})
	type result struct {
		r   ledger.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := a.Do(context.Background(), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
			close(started)
			<-answered // the provider answers after the lease ran out
			if answer == "not-sent" {
				return nil, ledger.NotSent(errors.New("connection refused"))
			}
			return []byte("ch_1"), nil
		}))
		done <- result{r, err}
	}()
	<-started
	clk.Advance(31 * time.Second)
	never := owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		t.Error("a second attempt reached the provider")
		return nil, nil
	})
	if _, err := b.Do(context.Background(), eff, never); !errors.Is(err, ledger.ErrPassHeld) {
		t.Fatalf("the reclaim: %v; want refused by the first attempt's pass", err)
	}
	close(answered)
	first := <-done
	if answer == "not-sent" {
		if !errors.Is(first.err, ledger.ErrNotSent) {
			t.Fatalf("the first Do: %v; want its not sent", first.err)
		}
		sent := 0
		r, err := b.Do(context.Background(), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
			sent++
			return []byte("ch_3"), nil
		}))
		if err != nil || r.Replayed || r.Attempt != 3 || sent != 1 {
			t.Fatalf("the next Do: %+v %v, sent %d; want attempt 3 sent once", r, err, sent)
		}
		return
	}
	if first.err != nil || string(first.r.Value) != "ch_1" || first.r.Attempt != 1 {
		t.Fatalf("the first Do: %+v %v; want its success, attempt 1", first.r, first.err)
	}
	r, err := b.Do(context.Background(), eff, never)
	if err != nil || !r.Replayed || string(r.Value) != "ch_1" || r.Attempt != 1 {
		t.Fatalf("the next Do: %+v %v; want the success replayed, attempt 1", r, err)
	}
	rec, err := a.Lookup(context.Background(), id.EffectID)
	if err != nil || rec == nil {
		t.Fatalf("record: %v %v", rec, err)
	}
	if rec.State != ledger.StateCompleted || len(rec.Attempts) != 2 ||
		rec.Attempts[0].State != ledger.AttemptCompleted || rec.Attempts[1].State != ledger.AttemptReleased || rec.Attempts[1].Fired {
		t.Fatalf("record %s attempts %+v; want completed: attempt 1 completed, attempt 2 released unfired", rec.State, rec.Attempts)
	}
}
