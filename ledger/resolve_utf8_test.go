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

// TestResolveRefusesInvalidUTF8: an operator's identity and note are text
// recorded on the resolution row (shown by effects show and in the run's
// witness, and written to DynamoDB, whose strings are UTF-8): bytes that
// are not UTF-8 are refused, nothing written, as control characters are.
func TestResolveRefusesInvalidUTF8(t *testing.T) {
	l, id, v := escapedEffect(t, "order-utf8")
	ctx := context.Background()
	for _, res := range []ledger.Resolution{
		{As: ledger.Delivered, Operator: "ops\xff", Rev: v.Rev},
		{As: ledger.Delivered, Operator: "\xc3", Rev: v.Rev},
		{As: ledger.NotDelivered, Operator: "ops", Note: "found \xe2\x82 in the console", Rev: v.Rev},
		// C1 control characters (U+0080..U+009F: U+009B is a terminal's
		// CSI, as ESC [ is) are no more printable than C0 ones.
		{As: ledger.Delivered, Operator: "ops\u009b31m", Rev: v.Rev},
		{As: ledger.Delivered, Operator: "ops", Note: "seen\u0085there", Rev: v.Rev},
	} {
		if _, err := l.Resolve(ctx, id.EffectID, res); err == nil {
			t.Errorf("resolution by %q note %q accepted; want it refused (not UTF-8)", res.Operator, res.Note)
		}
	}
	if after, _ := l.ShowEffect(ctx, id.EffectID); after.Rev != v.Rev {
		t.Fatalf("the record changed: rev %s, was %s", after.Rev, v.Rev)
	}
	if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "José@ops", Note: "trouvé ✓", Rev: v.Rev}); err != nil {
		t.Fatalf("a UTF-8 operator and note: %v", err)
	}
}

// TestResolveRefusesABlankOperator: a Resolution whose operator names no
// one (white space only, ASCII or not, or invisible format characters) is
// refused and nothing is written; a name with spaces inside is recorded.
func TestResolveRefusesABlankOperator(t *testing.T) {
	l, id, v := escapedEffect(t, "order-blank-operator")
	ctx := context.Background()
	for _, op := range []string{" ", "   ", "\u00a0\u3000", "\u200b", " \u2060 "} {
		if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: op, Rev: v.Rev}); err == nil {
			t.Errorf("resolution by %q accepted; want it refused (names no one)", op)
		}
	}
	if after, _ := l.ShowEffect(ctx, id.EffectID); after.Rev != v.Rev {
		t.Fatalf("the record changed: rev %s, was %s", after.Rev, v.Rev)
	}
	if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "Ana María (ops)", Rev: v.Rev}); err != nil {
		t.Fatalf("a name with spaces inside: %v", err)
	}
}

// escapedEffect returns a ledger on a memory store holding one escaped
// effect (its call uncertain) of key, with its identity and view.
func escapedEffect(t *testing.T, key string) (*ledger.Ledger, identity.Identity, ledger.EffectView) {
	t.Helper()
	clk := ledgertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key})
	ctx := context.Background()
	if _, err := l.Do(ctx, ledger.Effect{Identity: id}, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout after sending"))
	}); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatal(err)
	}
	v, err := l.ShowEffect(ctx, id.EffectID)
	if err != nil || v.State != ledger.EffectEscaped {
		t.Fatalf("view: %s %v", v.State, err)
	}
	return l, id, v
}
