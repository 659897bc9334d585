package regionsim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
)

// TestReconciledReleaseOverACompletionFiresAgain states a limit of
// reconciled-records (MULTI_REGION.md, "Not guaranteed"): during a
// partition eu fires an effect and records its success; us, not yet
// holding eu's record, claims the same effect, its call is refused before
// it leaves (ledger.NotSent: the provider unreachable from us) and us
// releases its claim. us's release is the later write, so replication keeps
// it in both regions: the surviving record says the effect was never sent,
// although eu's call was delivered. The conflict is audited; after healing
// a duplicate reclaims the released record and calls the provider again,
// under the same provider key (a provider that deduplicates on it performs
// one effect). The test holds the behaviour and fails the day a completed
// record wins over a later record that is not final.
func TestReconciledReleaseOverACompletionFiresAgain(t *testing.T) {
	w := newTwoRegions(t, fence.ReconciledRecords)
	eff := business(t, "refund-released")
	leu, lus := w.ledger(t, eu, nil), w.ledger(t, us, nil)
	w.rep.SetPartitioned(true)
	if _, err := leu.Do(ctx(t), eff, w.call); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil { // eu's writes observed, not delivered
		t.Fatal(err)
	}
	w.clock.Advance(10 * time.Millisecond)
	refused := func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("connection refused"))
	}
	if _, err := lus.Do(ctx(t), eff, refused); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatalf("us, its call refused: %v, want ledger.ErrNotSent", err)
	}
	w.heal(t)
	if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateReleased {
		t.Fatalf("converged on %s attempt %d; the limit this test states no longer holds: update MULTI_REGION.md and this test", rec.State, rec.Attempt)
	}
	if len(w.events) == 0 || w.count(conflictaudit.MetricConflicts) == 0 {
		t.Fatal("no conflict event for two regions' claims of one effect")
	}
	res, err := leu.Do(ctx(t), eff, w.call) // a duplicate after healing
	if err != nil || res.Replayed || w.prov.Requests() != 2 || w.prov.Effects() != 1 {
		t.Fatalf("duplicate after healing: %+v, %v; provider requests %d, effects %d; want a second call under the same provider key "+
			"(or update MULTI_REGION.md and this test)", res, err, w.prov.Requests(), w.prov.Effects())
	}
}
