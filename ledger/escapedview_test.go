package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// An attempt whose delivery is unknown (escaped) stays the effect's state
// until someone settles it, whatever attempts that never reached the
// provider (NotSent) came after it: the operator's view says escaped,
// effects list --state escaped finds it, and a resolution is accepted,
// as the exhausted error Do returns says (Escaped). A record shown
// pending here could neither be listed as escaped nor resolved.
func TestEscapedAttemptIsNotHiddenByLaterUnsentOnes(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-9"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id, Retry: &ledger.Retry{MaxAttempts: 2, Base: time.Millisecond, Max: time.Millisecond}}
	ctx := context.Background()
	if _, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("503 after the request was sent"))
	}); err == nil {
		t.Fatal("an uncertain call succeeded")
	}
	clk.Advance(time.Second)
	_, err = l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("connection refused"))
	})
	var ex *ledger.AttemptsExhaustedError
	if !errors.As(err, &ex) || !ex.Escaped {
		t.Fatalf("second attempt: %v; want attempts exhausted, an attempt escaped", err)
	}
	v, err := l.ShowEffect(ctx, id.EffectID)
	if err != nil || v.State != ledger.EffectEscaped || !v.Exhausted {
		t.Fatalf("view: %s exhausted %v (%v); want escaped, exhausted", v.State, v.Exhausted, err)
	}
	if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops", Rev: v.Rev}); err != nil {
		t.Fatalf("resolve delivered: %v", err)
	}
	if r, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		t.Fatal("a settled effect fired again")
		return nil, nil
	}); err != nil || !r.Replayed || !r.Resolved || r.Value != nil {
		t.Fatalf("after the resolution: %+v %v; want the delivery replayed, marked resolved by an operator, no value", r, err)
	}
}

// The one more attempt a not-delivered resolution grants can end without
// reaching the provider (NotSent, a context ended after its claim): the
// effect is then exhausted and pending, nothing escaped. An operator can
// grant it another attempt with a not-delivered resolution, which that
// state makes true by construction; a delivered one is refused.
func TestExhaustedPendingEffectTakesANotDeliveredResolution(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-10"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id, Retry: &ledger.Retry{MaxAttempts: 1}}
	ctx := context.Background()
	resolve := func(as ledger.Settlement) error {
		v, err := l.ShowEffect(ctx, id.EffectID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Resolve(ctx, id.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: v.Rev})
		return err
	}
	if _, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	}); !errors.Is(err, ledger.ErrAttemptsExhausted) {
		t.Fatalf("first: %v", err)
	}
	if err := resolve(ledger.NotDelivered); err != nil {
		t.Fatalf("resolving the escaped attempt: %v", err)
	}
	if _, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("connection refused"))
	}); !errors.Is(err, ledger.ErrAttemptsExhausted) {
		t.Fatalf("the granted attempt, not sent: %v", err)
	}
	if v, _ := l.ShowEffect(ctx, id.EffectID); v.State != ledger.EffectPending || !v.Exhausted {
		t.Fatalf("view %s exhausted %v; want pending, exhausted", v.State, v.Exhausted)
	}
	if err := resolve(ledger.Delivered); !errors.Is(err, ledger.ErrNotEscaped) {
		t.Fatalf("delivered for an effect nothing of which escaped: %v; want ErrNotEscaped", err)
	}
	if err := resolve(ledger.NotDelivered); err != nil {
		t.Fatalf("not-delivered for an exhausted pending effect: %v", err)
	}
	r, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { return []byte("refunded"), nil })
	if err != nil || r.Replayed || string(r.Value) != "refunded" {
		t.Fatalf("the attempt granted again: %+v %v; want it fired", r, err)
	}
}

// An effect with the most attempts its record keeps by itself
// (MaxMaxAttempts) still takes a not-delivered resolution: the attempt it
// grants fires. Before, a resolution at that cap recorded its row and
// granted nothing (the cap it set was the attempt count itself), the CLI
// said the next try fires, and every later Do returned the exhausted
// error: the effect could never move again. Grants stop only at a bound
// that keeps the record within its item (the executor's attempts and the
// rows of many resolutions), and a resolution past it is refused with an
// error saying so (it matches ErrAttemptsExhausted), nothing written.
func TestResolutionAtTheAttemptCapGrantsAnAttempt(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, MaxAttempts: ledger.MaxMaxAttempts,
		Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-500"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id}
	ctx := context.Background()
	fired := 0
	uncertain := func(context.Context, ledger.Call) ([]byte, error) {
		fired++
		return nil, ledger.Uncertain(errors.New("timeout after the request was sent"))
	}
	for n := 1; n <= ledger.MaxMaxAttempts; n++ {
		if _, err := l.Do(ctx, eff, uncertain); err == nil {
			t.Fatalf("attempt %d succeeded", n)
		}
		clk.Advance(time.Minute)
	}
	v, err := l.ShowEffect(ctx, id.EffectID)
	if err != nil || fired != ledger.MaxMaxAttempts || v.State != ledger.EffectEscaped || !v.Exhausted || v.Attempt != ledger.MaxMaxAttempts {
		t.Fatalf("after %d attempts (%d fired): %s, attempt %d, exhausted %v (%v)", ledger.MaxMaxAttempts, fired, v.State, v.Attempt, v.Exhausted, err)
	}
	resolve := func() (ledger.EffectView, error) {
		v, err := l.ShowEffect(ctx, id.EffectID)
		if err != nil {
			t.Fatal(err)
		}
		return l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Note: "not in the provider console", Rev: v.Rev})
	}
	if _, err := resolve(); err != nil {
		t.Fatalf("not-delivered at the cap: %v", err)
	}
	if _, err := l.Do(ctx, eff, uncertain); !errors.Is(err, ledger.ErrUncertain) || fired != ledger.MaxMaxAttempts+1 {
		t.Fatalf("the attempt the resolution granted: %v, fired %d in all; want it fired (%d), escaped again", err, fired, ledger.MaxMaxAttempts+1)
	}
	// Every further resolution grants one more attempt, up to the bound.
	grants := 1
	for ; ; grants++ {
		clk.Advance(time.Minute)
		before, _ := l.ShowEffect(ctx, id.EffectID)
		_, err := resolve()
		if err != nil {
			if !errors.Is(err, ledger.ErrAttemptsExhausted) || !strings.Contains(err.Error(), "delivered") {
				t.Fatalf("resolution %d refused with %v; want an error matching ErrAttemptsExhausted saying what is left", grants+1, err)
			}
			if after, _ := l.ShowEffect(ctx, id.EffectID); after.Rev != before.Rev {
				t.Fatal("a refused resolution wrote the record")
			}
			break
		}
		if _, err := l.Do(ctx, eff, uncertain); !errors.Is(err, ledger.ErrUncertain) {
			t.Fatalf("grant %d: %v", grants+1, err)
		}
		if _, err := l.Do(ctx, eff, uncertain); !errors.Is(err, ledger.ErrAttemptsExhausted) {
			t.Fatalf("after grant %d: %v, want exhausted again", grants+1, err)
		}
		if fired != ledger.MaxMaxAttempts+grants+1 {
			t.Fatalf("grant %d: %d fired in all, want %d", grants+1, fired, ledger.MaxMaxAttempts+grants+1)
		}
	}
	if grants < 50 {
		t.Fatalf("only %d resolutions granted an attempt; want at least 50", grants)
	}
	// Delivered still settles it.
	v, _ = l.ShowEffect(ctx, id.EffectID)
	if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops", Rev: v.Rev}); err != nil {
		t.Fatalf("delivered past the bound: %v", err)
	}
}
