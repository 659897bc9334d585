package regionsim_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
)

// TestReconciledReleaseOverACompletionIsWrittenBack: during a partition
// eu fires an effect and records its success; us, not yet holding eu's
// record, claims the same effect, its call is refused before it leaves
// (ledger.NotSent: the provider unreachable from us) and us releases its
// claim. us's release is the later write, so replication alone keeps it in
// both regions: the surviving record says the effect was never sent,
// although eu's call was delivered, and a duplicate after healing would
// reclaim it and call the provider again. eu's auditor, wired as its main
// wires it under reconciled-records (auditfn.EffectTableRestorer on this
// region's EFFECTS_TABLE), reads us's release over its completed record:
// a conflict, recorded, and the completed record is written back
// (conditional on the release as the change showed it); that write
// replicates as the newest. Both regions end on the completed record, and
// a duplicate in either region replays it: one provider call.
func TestReconciledReleaseOverACompletionIsWrittenBack(t *testing.T) {
	w := newTwoRegions(t, fence.ReconciledRecords)
	auditErr := w.effectRestoringAuditors(t, false)
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
	for range 3 { // the write-back replicates
		w.clock.Advance(time.Second)
		if err := w.rep.Sync(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if *auditErr != nil {
		t.Fatal(*auditErr)
	}
	if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateCompleted {
		t.Fatalf("converged on %s attempt %d; want eu's completed record", rec.State, rec.Attempt)
	}
	// One conflict, recorded once: by eu when it writes its record back;
	// that write-back's own change, in eu's stream and in us's, is not
	// recorded again.
	if n := w.count(conflictaudit.MetricConflicts); n != 1 {
		t.Fatalf("%d conflict events for two regions' claims of one effect; want 1", n)
	}
	for _, l := range []*ledger.Ledger{leu, lus} {
		res, err := l.Do(ctx(t), eff, w.call) // a duplicate after healing
		if err != nil || !res.Replayed || w.prov.Requests() != 1 {
			t.Fatalf("duplicate after healing: %+v, %v; provider requests %d; want the delivered call replayed", res, err, w.prov.Requests())
		}
	}
}

// effectRestoringAuditors wires each region's auditor as its main wires it
// under reconciled-records (auditfn.EffectTableRestorer on the region's
// EffectsTable); with ttlDeletes every deletion reaches it as TTL's. It
// returns where a failed write-back's error is kept.
func (w *twoRegions) effectRestoringAuditors(t *testing.T, ttlDeletes bool) *error {
	var auditErr error
	for _, r := range w.p.names {
		a := &auditfn.Auditor{Conflicts: w.auditors[r], Now: w.clock.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			RestoreEffects: auditfn.EffectTableRestorer{Client: w.p.db(r), Table: w.p.tables[r]}}
		w.audit[r] = func(c changeRecord) {
			rec := stream.StreamRecord{EventName: c.Event, Keys: c.Keys, OldImage: c.Old, NewImage: c.New}
			if ttlDeletes && c.Event == "REMOVE" {
				rec.PrincipalID, rec.IdentityType = stream.TTLPrincipal, "Service"
			}
			if cnt := a.Audit(ctx(t), []stream.StreamRecord{rec}); cnt.RestoreErr != nil {
				auditErr = cnt.RestoreErr
			}
		}
	}
	return &auditErr
}
