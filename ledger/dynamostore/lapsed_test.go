package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// The lapsed escaped effect of ledger/fence's
// TestLapsedEscapedEffectCanBeResolved on DynamoDB: the refused claim's
// release carries the held pass's token and its attempt escaped, so the
// effect is shown escaped, and a not-delivered resolution reopens that
// token: the next try fires once, later ones replay.
func TestLapsedEscapedEffectResolvedOnDynamoDB(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := newEnv(t, e)
		owner, err := fence.New(fence.Config{Store: fencemem.New(), Now: v.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: v.store, Lease: 30 * time.Second, Wait: -1, Fencer: owner,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: v.clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		eff := business(t, "lapsed-escaped")
		ctx := context.Background()
		call := owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
			return v.prov.Call(ctx, c.ProviderKey, "x")
		})
		if _, err := l.Do(ctx, eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("503 after the request was sent"))
		})); !errors.Is(err, ledger.ErrUncertain) {
			t.Fatalf("first attempt: %v", err)
		}
		v.clock.Advance(14*24*time.Hour + 12*time.Hour)
		if _, err := l.Do(ctx, eff, call); !errors.Is(err, ledger.ErrPassHeld) {
			t.Fatalf("Do after the record lapsed: %v; want refused by the held pass", err)
		}
		view, err := l.ShowEffect(ctx, eff.Identity.EffectID)
		if err != nil || view.State != ledger.EffectEscaped {
			t.Fatalf("view: %s (%v); want escaped", view.State, err)
		}
		if _, err := l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: view.Rev}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		for i := 0; i < 2; i++ {
			if r, err := l.Do(ctx, eff, call); err != nil || r.Replayed != (i > 0) {
				t.Fatalf("Do %d after the resolution: %+v %v", i, r, err)
			}
		}
		if n := v.prov.Requests(); n != 1 {
			t.Fatalf("provider called %d times, want 1", n)
		}
	})
}
