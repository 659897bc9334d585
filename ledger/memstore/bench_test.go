package memstore_test

import (
	"context"
	"github.com/idemkit/idemkit/ledger/identity"
	"strconv"
	"testing"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/memstore"
)

func ok(context.Context, ledger.Call) ([]byte, error) { return []byte("ok"), nil }

// BenchmarkDoFirst measures a first effect (claim, which is also the fire
// mark without a Fencer, and outcome).
func BenchmarkDoFirst(b *testing.B) {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: strconv.Itoa(i)})
		if _, err := l.Do(ctx, ledger.Effect{Identity: id}, ok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoDuplicate measures a suppressed duplicate (one store call).
func BenchmarkDoDuplicate(b *testing.B) {
	l, _ := ledger.New(ledger.Config{Store: memstore.New()})
	ctx := context.Background()
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "dup"})
	eff := ledger.Effect{Identity: id}
	if _, err := l.Do(ctx, eff, ok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := l.Do(ctx, eff, ok); err != nil || !r.Replayed {
			b.Fatal(r, err)
		}
	}
}
