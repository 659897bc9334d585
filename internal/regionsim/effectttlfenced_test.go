package regionsim_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
)

// TestEffectFencedReplicaTTLDeleteLosesTheOutcome pins an exposure left
// open (RED_TEAM ZZ1): under fenced-effects EffectsTable keeps its TTL in
// every replica (only IdempotencyTable gave it up for the home stack's
// sweeper, RED_TEAM 76), and TTL deletes are region-local and replicate,
// last writer wins. An effect delivered from the home region (eu) is
// delivered anew past its record's and its fence item's retention (a new
// effect, rightly), while us still holds the old, expired record; us's TTL
// deletes it before eu's new record reaches us. The deletion is the
// record's newest write, so replication deletes eu's new, completed record
// in the home region too, within its retention, and under fenced-effects
// no auditor writes it back. The fence still holds the new delivery's
// pass, so nothing is sent twice; but the outcome is lost: a duplicate in
// either region is refused (the pass held) instead of replayed, and the
// record it leaves is pending, not escaped, which neither settlement
// resolves (once its tries are spent, a not-delivered resolution grants
// one more, which the same pass refuses again) until that pass is a
// retention old. A fix turns this test
// around: the duplicate replays the new delivery. (Forced here as
// TestEffectReconciledTTLDeleteFromTheOtherRegion forces it under
// reconciled-records, where the auditor writes the record back.)
func TestEffectFencedReplicaTTLDeleteLosesTheOutcome(t *testing.T) {
	w := newTwoRegions(t, fence.FencedEffects)
	fstore, err := fencedynamo.New(fencedynamo.Config{Client: w.p.db(eu), Table: w.p.emu[eu].CreateTable(t, "FenceTable")})
	if err != nil {
		t.Fatal(err)
	}
	owner := func(r string) *fence.Owner {
		o, err := fence.New(fence.Config{Store: fstore, Region: r, Now: w.clock.Now, Metrics: w.rec})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	oeu, ous := owner(eu), owner(us)
	leu, lus := w.homeLedger(t, eu, oeu), w.homeLedger(t, us, ous)
	eff := business(t, "refund-after-both-retentions")
	if _, err := leu.Do(ctx(t), eff, oeu.Guard(w.call)); err != nil {
		t.Fatal(err)
	}
	w.heal(t) // replicated to us
	w.clock.Advance(fence.DefaultRetention + time.Hour)
	if res, err := leu.Do(ctx(t), eff, oeu.Guard(w.call)); err != nil || res.Replayed || w.prov.Requests() != 2 {
		t.Fatalf("eu, past both retentions: %+v, %v, provider requests %d; want a new effect, delivered", res, err, w.prov.Requests())
	}
	if _, err := w.rep.Step(ctx(t)); err != nil { // eu's new record observed, not yet applied in us
		t.Fatal(err)
	}
	w.clock.Advance(10 * time.Millisecond)
	key := map[string]types.AttributeValue{"pk": s("effect#" + eff.Identity.EffectID), "sk": s("record")}
	if _, err := w.p.db(us).DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(w.p.tables[us]), Key: key}); err != nil {
		t.Fatal(err) // us's TTL: the old record, expired
	}
	w.heal(t)
	for range 3 {
		w.clock.Advance(time.Second)
		if err := w.rep.Sync(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if it := get(t, w.p.db(eu), w.p.tables[eu], key); it != nil {
		t.Fatalf("the home region's new record survived the other replica's TTL delete: %v (ZZ1 fixed? turn this test around)", decodeEffect(t, it))
	}
	for _, l := range []*ledger.Ledger{leu, lus} {
		res, err := l.Do(ctx(t), eff, oeu.Guard(w.call)) // a duplicate of the new delivery
		if !errors.Is(err, ledger.ErrPassHeld) || res.Replayed || w.prov.Requests() != 2 {
			t.Fatalf("a duplicate of the new delivery: %+v, %v, provider requests %d; want refused by the pass held (the outcome lost), nothing sent", res, err, w.prov.Requests())
		}
	}
	v, err := leu.ShowEffect(ctx(t), eff.Identity.EffectID)
	if err != nil || v.State != ledger.EffectPending {
		t.Fatalf("the effect after its record was lost: %+v, %v; want pending (released, nothing escaped)", v, err)
	}
	for _, as := range []ledger.Settlement{ledger.Delivered, ledger.NotDelivered} {
		if _, err := leu.Resolve(ctx(t), eff.Identity.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: v.Rev}); !errors.Is(err, ledger.ErrNotEscaped) {
			t.Fatalf("resolve as %s: %v; want refused, not escaped", as, err)
		}
	}
}
