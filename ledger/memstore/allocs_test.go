// The race detector drops sync.Pool items at random, so allocation counts
// mean nothing under it: these pins are built without it only (the allocs
// check step of make test runs them).

//go:build !race

package memstore_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// TestDoAllocations pins the in-process cost of ledger.Do on the memory
// store without a TracerProvider (the default): a first effect (its
// identity computed, claim, effect function, outcome, the heartbeat
// started and stopped) makes at most firstEffectAllocs heap allocations, a
// suppressed duplicate of an identity already computed at most
// duplicateAllocs (70 and 21 while spans that were off still cost their
// attributes and outcome). Tracing that is off costs nothing.
func TestDoAllocations(t *testing.T) {
	l, err := ledger.New(ledger.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	i := 0
	first := testing.AllocsPerRun(200, func() {
		i++
		id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: strconv.Itoa(i)})
		if r, err := l.Do(ctx, ledger.Effect{Identity: id}, ok); err != nil || r.Replayed {
			t.Fatal(r, err)
		}
	})
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "dup"})
	eff := ledger.Effect{Identity: id}
	if _, err := l.Do(ctx, eff, ok); err != nil {
		t.Fatal(err)
	}
	dup := testing.AllocsPerRun(200, func() {
		if r, err := l.Do(ctx, eff, ok); err != nil || !r.Replayed {
			t.Fatal(r, err)
		}
	})
	if first > firstEffectAllocs {
		t.Errorf("first effect: %v allocs, want <= %d", first, firstEffectAllocs)
	}
	if dup > duplicateAllocs {
		t.Errorf("duplicate: %v allocs, want <= %d", dup, duplicateAllocs)
	}
	t.Logf("first effect %v allocs, duplicate %v", first, dup)
}
