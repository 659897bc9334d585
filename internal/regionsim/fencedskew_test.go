package regionsim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestFencedEffectsUnderClockSkew: fenced-effects claims at most one
// provider call per effect identity under clock skew, which only the model
// showed. Here us's executor clock runs two minutes ahead of eu's (four
// leases), so it takes eu's live claim over at once, on DynamoDB through
// the home region as the kit wires it. eu's executor stalls either after
// taking its token (before the point of no return) or inside the provider
// call (after it). Either way the provider sees exactly one call: before
// the pass, eu's point-of-no-return write is refused as stale and us's call
// is the one; after it, us's token is refused because eu's passed, and eu's
// call is the one.
func TestFencedEffectsUnderClockSkew(t *testing.T) {
	for _, stallAfterPass := range []bool{false, true} {
		name := "stalled before the pass"
		if stallAfterPass {
			name = "stalled in the call"
		}
		t.Run(name, func(t *testing.T) {
			w := newTwoRegions(t, fence.FencedEffects)
			fstore, err := fencedynamo.New(fencedynamo.Config{Client: w.p.db(eu), Table: w.p.emu[eu].CreateTable(t, "FenceTable")})
			if err != nil {
				t.Fatal(err)
			}
			ahead := func() time.Time { return w.clock.Now().Add(2 * time.Minute) }
			owner := func(r string, now func() time.Time) *fence.Owner {
				o, err := fence.New(fence.Config{Store: fstore, Region: r, Now: now, Metrics: w.rec})
				if err != nil {
					t.Fatal(err)
				}
				return o
			}
			ledgerAt := func(r string, f ledger.Fencer, now func() time.Time) *ledger.Ledger {
				st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: kit.HomeClient(w.p.db(r), eu), Table: w.p.tables[eu]})
				if err != nil {
					t.Fatal(err)
				}
				l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Fencer: f, Metrics: w.rec,
					Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: now}}})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			oeu, ous := owner(eu, w.clock.Now), owner(us, ahead)
			stalled, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			stall := func() { once.Do(func() { close(stalled); <-release }) }
			var feu ledger.Fencer = oeu
			call := w.call
			if stallAfterPass {
				call = func(ctx context.Context, c ledger.Call) ([]byte, error) { stall(); return w.call(ctx, c) }
			} else {
				feu = hookFencer{oeu, stall}
			}
			leu, lus := ledgerAt(eu, feu, w.clock.Now), ledgerAt(us, ous, ahead)
			eff := business(t, "skewed")

			w.rep.SetPartitioned(true)
			var euErr error
			done := make(chan struct{})
			go func() { defer close(done); _, euErr = leu.Do(context.Background(), eff, oeu.Guard(call)) }()
			<-stalled
			_, usErr := lus.Do(ctx(t), eff, ous.Guard(w.call)) // eu's lease looks ended on us's clock
			close(release)
			<-done
			if w.prov.Requests() != 1 {
				t.Fatalf("provider saw %d calls, want exactly 1 (eu: %v, us: %v)", w.prov.Requests(), euErr, usErr)
			}
			if stallAfterPass {
				if !errors.Is(usErr, fence.ErrIssued) {
					t.Fatalf("us after eu's pass: %v, want its token refused (%v)", usErr, fence.ErrIssued)
				}
			} else if usErr != nil || !errors.Is(euErr, ledger.ErrStaleFence) && !errors.Is(euErr, ledger.ErrLeaseLost) {
				t.Fatalf("us before eu's pass: %v, want its call made; eu: %v, want its stale token refused", usErr, euErr)
			}
			w.heal(t)
			w.converged(t, eff.Identity.EffectID)
			// Every write went to the home region's table, each
			// conditional on the one before: the takeover on a clock
			// ahead is no conflict in any region's stream.
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.events) != 0 {
				t.Fatalf("conflict events %+v; want none under fenced-effects", w.events)
			}
		})
	}
}
