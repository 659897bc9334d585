package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// An operator's resolution of an escaped effect (unfenced) whose write is
// applied and its answer lost: the SDK's retry fails its condition against
// the resolution itself, which counts as made (its new owner token tells
// it apart). When the SDK gives up, Resolve errs, the resolution stands,
// and resolving again on the rev shown is refused as changed. Either way:
// delivered, the provider sees the one effect it already had and every
// Do replays it; not delivered, the next Do fires exactly one more
// attempt under the same provider key.
func TestLostAnswerResolve(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, as := range []ledger.Settlement{ledger.Delivered, ledger.NotDelivered} {
			for _, c := range dynamotest.Losses("PutItem") {
				t.Run(string(as)+"/"+slug(c.Name), func(t *testing.T) {
					v := newEnv(t, e)
					eff := business(t, "resolve-"+string(as)+"-"+slug(c.Name))
					l := v.ledgerOn(t, v.store, nil)
					v.killedAfterProvider(t, l, eff)
					v.clock.Advance(31 * time.Second)
					ctx := context.Background()
					shown, err := l.ShowEffect(ctx, eff.Identity.EffectID)
					if err != nil || shown.State != ledger.EffectEscaped {
						t.Fatalf("shown %s %v; want escaped", shown.State, err)
					}
					c.Arm(v.faults)
					got, err := l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: shown.Rev})
					if v.faults.Pending() != 0 {
						t.Fatalf("%d faults pending", v.faults.Pending())
					}
					v.faults.Clear()
					want := ledger.EffectCompleted
					if as == ledger.NotDelivered {
						want = ledger.EffectPending
					}
					if c.Landed {
						if err != nil || got.State != want {
							t.Fatalf("resolution with a lost answer: %s %v; want %s", got.State, err, want)
						}
					} else {
						if err == nil {
							t.Fatal("resolution whose SDK retries gave up: no error")
						}
						if _, err := l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: shown.Rev}); !errors.Is(err, ledger.ErrChanged) {
							t.Fatalf("resolving again on the rev shown: %v; want ErrChanged (the first one stands)", err)
						}
					}
					now, err := l.ShowEffect(ctx, eff.Identity.EffectID)
					if err != nil || now.State != want || now.Attempt != 2 {
						t.Fatalf("after: %s attempt %d %v; want %s, the resolution's row 2", now.State, now.Attempt, err, want)
					}
					calls := 0
					fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
						calls++
						return v.prov.Call(ctx, call.ProviderKey, "x")
					}
					for i := 0; i < 2; i++ {
						r, err := l.Do(ctx, eff, fn)
						if err != nil {
							t.Fatalf("Do %d: %v", i+1, err)
						}
						if as == ledger.Delivered && (!r.Replayed || !r.Resolved) {
							t.Fatalf("Do %d: %+v; want the operator's delivery replayed", i+1, r)
						}
					}
					wantCalls := 0
					if as == ledger.NotDelivered {
						wantCalls = 1
					}
					if calls != wantCalls || v.prov.Effects() != 1 {
						t.Fatalf("%d calls, provider effects %d; want %d calls, 1 effect", calls, v.prov.Effects(), wantCalls)
					}
				})
			}
		}
	})
}
