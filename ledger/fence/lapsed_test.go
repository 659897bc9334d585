package fence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// An escaped effect whose ledger record lapsed (the ledger's retention
// after its last write) while the fence still holds its pass (the fence
// keeps an item a day longer) is, on its next Do, a new record whose claim
// the fence refuses, and each refusal extends both. The refused record
// carries the held pass's token, so the operator's view shows the effect
// escaped and a resolution settles it: not delivered reopens exactly that
// token and the next try fires once; delivered makes every retry replay.
func TestLapsedEscapedEffectCanBeResolved(t *testing.T) {
	for _, as := range []ledger.Settlement{ledger.NotDelivered, ledger.Delivered} {
		t.Run(string(as), func(t *testing.T) {
			w := newWorld(t)
			r := w.region(t, "eu-west-1", nil)
			eff := effect(t, "order-lapsed-"+string(as))
			ctx := context.Background()
			if _, err := r.ledger.Do(ctx, eff, r.owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
				return nil, ledger.Uncertain(errors.New("503 after the request was sent"))
			})); !errors.Is(err, ledger.ErrUncertain) {
				t.Fatalf("first attempt: %v; want uncertain", err)
			}
			w.clock.Advance(14*24*time.Hour + 12*time.Hour) // the record lapsed, the fence holds the pass
			if _, err := r.ledger.Do(ctx, eff, w.call(r)); !errors.Is(err, ledger.ErrPassHeld) {
				t.Fatalf("Do after the record lapsed: %v; want refused by the held pass", err)
			}
			if w.prov.Requests() != 0 {
				t.Fatal("the provider was called past the held pass")
			}
			w.clock.Advance(time.Hour)
			if _, err := r.ledger.Do(ctx, eff, w.call(r)); !errors.Is(err, ledger.ErrPassHeld) {
				t.Fatalf("second Do after the record lapsed: %v; want refused", err)
			}
			v, err := r.ledger.ShowEffect(ctx, eff.Identity.EffectID)
			if err != nil || v.State != ledger.EffectEscaped {
				t.Fatalf("view: %s (%v); want escaped (no operator path otherwise)", v.State, err)
			}
			for _, a := range v.Attempts {
				if a.State != ledger.AttemptEscaped || a.Fired {
					t.Fatalf("attempt %+v; want escaped (the held pass), never fired", a)
				}
			}
			if _, err := r.ledger.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: v.Rev}); err != nil {
				t.Fatalf("Resolve %s: %v", as, err)
			}
			want := 0
			if as == ledger.NotDelivered {
				want = 1
			}
			for i := 0; i < 3; i++ {
				w.clock.Advance(time.Minute)
				res, err := r.ledger.Do(ctx, eff, w.call(r))
				if err != nil {
					t.Fatalf("Do %d after the resolution: %v", i, err)
				}
				if i > 0 || as == ledger.Delivered {
					if !res.Replayed {
						t.Fatalf("Do %d after the resolution fired again: %+v", i, res)
					}
				}
			}
			if n := w.prov.Requests(); n != want {
				t.Fatalf("the provider was called %d times after a %s resolution, want %d", n, as, want)
			}
		})
	}
}

// A pass younger than the ledger's retention may be an attempt still in
// flight in another region, whose record has not reached this one: a claim
// it refuses is released, not shown escaped, and cannot be resolved.
func TestYoungHeldPassIsNotRecordedEscaped(t *testing.T) {
	w := newWorld(t)
	a, b := w.region(t, "eu-west-1", nil), w.region(t, "us-east-1", nil)
	eff := effect(t, "order-young-pass")
	ctx := context.Background()
	if _, err := a.ledger.Do(ctx, eff, a.owner.Guard(func(ctx context.Context, c ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("503 after the request was sent"))
	})); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatalf("first attempt: %v; want uncertain", err)
	}
	w.clock.Advance(13 * 24 * time.Hour)
	if _, err := b.ledger.Do(ctx, eff, w.call(b)); !errors.Is(err, ledger.ErrPassHeld) {
		t.Fatalf("Do in the other region: %v; want refused by the held pass", err)
	}
	v, err := b.ledger.ShowEffect(ctx, eff.Identity.EffectID)
	if err != nil || v.State != ledger.EffectPending || v.Attempts[0].State != ledger.AttemptReleased {
		t.Fatalf("view in the other region: %s %+v (%v); want pending, its attempt released", v.State, v.Attempts, err)
	}
	if _, err := b.ledger.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); !errors.Is(err, ledger.ErrNotEscaped) {
		t.Fatalf("Resolve in the other region: %v; want ErrNotEscaped", err)
	}
	if w.prov.Requests() != 0 {
		t.Fatal("the provider was called")
	}
}
