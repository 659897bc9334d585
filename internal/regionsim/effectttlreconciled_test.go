package regionsim_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
)

// TestEffectReconciledTTLDeleteFromTheOtherRegion: under
// reconciled-records EffectsTable keeps its TTL in every replica, and TTL
// deletes are region-local and replicate, last writer wins. An effect
// performed in eu and replicated is performed again in eu past its
// retention (a new effect, rightly: a new record), while us still holds
// the old, expired record; us's TTL deletes it before eu's new record
// reaches us. That deletion is the record's newest write, so replication
// deletes eu's new, completed record in both regions, within its
// retention: a duplicate in eu, the only region that ever ran the effect,
// would call the provider again. eu's auditor reads a TTL deletion of a
// record TTL could not have deleted there (live at the deletion's time),
// so it is the other region's deletion of an older record: it writes the
// record back, and a duplicate in either region replays it.
func TestEffectReconciledTTLDeleteFromTheOtherRegion(t *testing.T) {
	w := newTwoRegions(t, fence.ReconciledRecords)
	auditErr := w.effectRestoringAuditors(t, true) // every deletion here is TTL's, and its replication
	eff := business(t, "refund-after-retention")
	leu := w.ledger(t, eu, nil)
	if _, err := leu.Do(ctx(t), eff, w.call); err != nil {
		t.Fatal(err)
	}
	w.heal(t) // replicated to us
	w.clock.Advance(ledger.MinRetention + time.Hour)
	anew := w.clock.Now()
	if res, err := leu.Do(ctx(t), eff, w.call); err != nil || res.Replayed {
		t.Fatalf("eu, past the retention: %+v, %v; want a new effect, performed", res, err)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil { // eu's new record observed, not yet applied
		t.Fatal(err)
	}
	w.clock.Advance(10 * time.Millisecond)
	key := map[string]types.AttributeValue{"pk": s("effect#" + eff.Identity.EffectID), "sk": s("record")}
	if _, err := w.p.db(us).DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(w.p.tables[us]), Key: key}); err != nil {
		t.Fatal(err) // us's TTL: the old record, expired
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
	if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateCompleted || rec.CreatedAt.Before(anew) {
		t.Fatalf("converged on %s created %s; want eu's new completed record (created %s), not the old one us's TTL deleted",
			rec.State, rec.CreatedAt, anew)
	}
	for _, r := range []string{eu, us} {
		res, err := w.ledger(t, r, nil).Do(ctx(t), eff, w.call) // a duplicate of the new effect
		if err != nil || !res.Replayed || w.prov.Requests() != 2 {
			t.Fatalf("%s: a duplicate of the new effect: %+v, %v; provider requests %d; want 2 (once per retention period), replayed", r, res, err, w.prov.Requests())
		}
	}
}
