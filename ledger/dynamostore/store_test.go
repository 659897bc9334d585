package dynamostore_test

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestConformance(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		counter := dynamotest.NewCounter()
		client := e.Client(counter.Middleware())
		dup := 1
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			dup = 2 // the failed claim does not return the item: a GetItem follows
		}
		ledgertest.Run(t, ledgertest.Harness{
			NewStore: func(t *testing.T) ledger.Store {
				return newStore(t, client, e.CreateTable(t, "EffectsTable"))
			},
			RoundTrips:          counter.Total,
			ResetRoundTrips:     counter.Reset,
			DuplicateRoundTrips: dup,
		})
	})
}

type env struct {
	store  *dynamostore.Store
	faults *dynamotest.Faults
	clock  *ledgertest.Clock
	prov   *ledgertest.Provider
	l      *ledger.Ledger
}

func newEnv(t *testing.T, e *dynamotest.Emulator) *env {
	f := dynamotest.NewFaults()
	client := e.Client(f.Middleware(), dynamotest.FastRetries)
	st := newStore(t, client, e.CreateTable(t, "EffectsTable"))
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	return &env{store: st, faults: f, clock: clock, prov: ledgertest.NewProvider(t), l: l}
}

func business(t *testing.T, key string) ledger.Effect {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Effect{Identity: id, RunID: "acme/run-0123456789abcdef", NodeID: "charge"}
}

// An executor killed by a DynamoDB failure after the provider call (the
// outcome PutItem never reaches the server): the retry reuses the provider
// key and the provider deduplicates it.
func TestInjectedFailureAfterProviderCall(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		eff := business(t, "inj-1")
		_, err := v.l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
			b, err := v.prov.Call(ctx, c.ProviderKey, "x")
			v.faults.FailNext("PutItem", 1, errors.New("injected: process killed"))
			return b, err
		})
		if err == nil {
			t.Fatal("Do succeeded although the outcome write failed")
		}
		v.faults.Clear()
		v.clock.Advance(31 * time.Second)
		r, err := v.l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
			return v.prov.Call(ctx, c.ProviderKey, "x")
		})
		if err != nil || r.Attempt != 2 || v.prov.Effects() != 1 || v.prov.Requests() != 2 {
			t.Fatalf("retry %+v %v effects=%d requests=%d", r, err, v.prov.Effects(), v.prov.Requests())
		}
		rec, _ := v.store.Get(context.Background(), "effect#"+eff.Identity.EffectID)
		var states []ledger.AttemptState
		for _, a := range rec.Attempts {
			states = append(states, a.State)
		}
		if !slices.Equal(states, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
			t.Fatalf("attempts %v", states)
		}
	})
}

// Every write applied by the server whose response is lost (the SDK retries
// it and the retry fails its own condition) still counts as done: no false
// "lost claim", no double fire.
func TestLostResponsesAreRecognised(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		eff := business(t, "lost-1")
		calls := 0
		v.faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost()) // the claim
		r, err := v.l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
			calls++
			v.faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost()) // the outcome
			return v.prov.Call(ctx, c.ProviderKey, "x")
		})
		if err != nil || r.Replayed || calls != 1 {
			t.Fatalf("Do with lost responses: %+v %v calls=%d", r, err, calls)
		}
		d, err := v.l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
			calls++
			return nil, nil
		})
		if err != nil || !d.Replayed || calls != 1 || v.prov.Effects() != 1 {
			t.Fatalf("duplicate %+v %v calls=%d", d, err, calls)
		}
	})
}

// Injected errors on the claim surface as errors; nothing fires.
func TestInjectedClaimError(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		boom := errors.New("injected")
		v.faults.FailNext("PutItem", 1, boom)
		calls := 0
		_, err := v.l.Do(context.Background(), business(t, "claim-err"), func(context.Context, ledger.Call) ([]byte, error) {
			calls++
			return nil, nil
		})
		if !errors.Is(err, boom) || calls != 0 {
			t.Fatalf("Do: %v calls=%d", err, calls)
		}
	})
}
