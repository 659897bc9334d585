package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// An operator's ledger (`idemkit effects`, built with the defaults) reads
// an effect made by executors whose Config.MaxAttempts is not the default,
// with no Retry of its own: it sees the cap the executors stop at. Before,
// such a record carried no cap, and the operator's view took its own
// (DefaultMaxAttempts): an escaped effect the executors had given up on
// was shown "attempt 3 of 50", not exhausted, its next attempt "any
// time", and an exhausted pending one (its attempts since the one that
// fired never reached the provider) was refused a not-delivered
// resolution as "pending", while every Do returned the exhausted error:
// the effect could not move again until its record passed its retention.
func TestOperatorSeesTheExecutorsAttemptCap(t *testing.T) {
	for _, c := range []struct {
		name  string
		end   func(error) error
		state ledger.EffectState
	}{
		{"escaped", ledger.Uncertain, ledger.EffectEscaped},
		{"pending", ledger.NotSent, ledger.EffectPending},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := ledgertest.NewClock(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC))
			st := memstore.New()
			exec, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, MaxAttempts: 3, Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			op, err := ledger.New(ledger.Config{Store: st, Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-cap-" + c.name})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id}
			ctx := context.Background()
			fired := 0
			for i := 0; i < 3; i++ {
				_, err := exec.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
					fired++
					return nil, c.end(errors.New("no answer"))
				})
				if err == nil {
					t.Fatalf("attempt %d succeeded", i+1)
				}
				clk.Advance(time.Second)
			}
			if _, err := exec.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
				t.Fatal("fired past the executor's cap")
				return nil, nil
			}); !errors.Is(err, ledger.ErrAttemptsExhausted) {
				t.Fatalf("after 3 attempts: %v; want attempts exhausted", err)
			}
			v, err := op.ShowEffect(ctx, id.EffectID)
			if err != nil {
				t.Fatal(err)
			}
			if v.State != c.state || v.MaxAttempts != 3 || !v.Exhausted || !v.NextAttemptAt.IsZero() {
				t.Fatalf("operator's view: %s, attempt %d of %d, exhausted %v, next %v; want %s, 3 of 3, exhausted, none",
					v.State, v.Attempt, v.MaxAttempts, v.Exhausted, v.NextAttemptAt, c.state)
			}
			if _, err := op.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); err != nil {
				t.Fatalf("not-delivered resolution: %v", err)
			}
			r, err := exec.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
				fired++
				return []byte("charged"), nil
			})
			if err != nil || r.Replayed || string(r.Value) != "charged" || fired != 4 {
				t.Fatalf("the granted attempt: %+v %v, fired %d; want it fired once more (4)", r, err, fired)
			}
		})
	}
}
