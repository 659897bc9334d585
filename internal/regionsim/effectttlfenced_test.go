package regionsim_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/sweeper"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
)

// TestEffectFencedReplicaTTLDeleteFromAReplica (RED_TEAM 397): under
// fenced-effects every effect record is written in the home region's
// replica of EffectsTable, and every deletion of one must be decided there
// too. DynamoDB's TTL runs in every replica of a global table and its
// deletes replicate like any other write, last writer wins, so the template
// gives EffectsTable no TTL under fenced-effects, as it gives
// IdempotencyTable none (TestTemplateSweeperPerPosture), and the home
// stack's sweeper deletes its expired items with DeleteItems conditional on
// the home region's item (expiresAt at or before the sweep's start).
//
// The scenario: an effect is delivered from the home region (eu) and its
// record replicates; past its record's and its fence item's retention the
// same effect is delivered anew from eu, rightly (a new effect), while us
// still holds the old, expired record.
//
//   - "home sweeper" is the deployment: nothing deletes in us; the home
//     region's sweeper scans while the old record is expired and deletes
//     after the new delivery has replaced it (the interleaving is forced):
//     its delete, conditional on the home item's expiry, fails. The new
//     record replicates over us's old item, and a duplicate in either
//     region replays it: the provider is called once per retention period.
//   - "TTL in a replica" is why TTL stays off: the same scenario with us's
//     TTL deleting the old record it still holds before eu's new record
//     reaches it (the unconditional DeleteItem TTL issues). The deletion is
//     the record's newest write, so replication deletes eu's new, completed
//     record in the home region too, and under fenced-effects no auditor
//     writes it back. The fence still holds the new delivery's pass, so
//     nothing is sent twice, but the outcome is lost: a duplicate in either
//     region is refused (the pass held) instead of replayed, and the record
//     it leaves is pending, not escaped, which neither settlement resolves
//     until that pass is a retention old. (Forced as
//     TestEffectReconciledTTLDeleteFromTheOtherRegion forces it under
//     reconciled-records, where the auditor writes the record back.)
func TestEffectFencedReplicaTTLDeleteFromAReplica(t *testing.T) {
	t.Run("home sweeper", func(t *testing.T) {
		w, eff, leu, lus := newFencedTTLWorld(t)
		var anew time.Time
		var once sync.Once
		sw := &sweeper.Sweeper{API: scanHook{API: w.p.db(eu), after: func() {
			once.Do(func() {
				anew = w.clock.Now()
				if res, err := leu.do(eff); err != nil || res.Replayed || w.prov.Requests() != 2 {
					t.Errorf("eu, past both retentions, during the sweep: %+v, %v, provider requests %d; want a new effect, delivered", res, err, w.prov.Requests())
				}
			})
		}}, Table: w.p.tables[eu], KeyAttrs: []string{"pk", "sk"}, Concurrency: 1}
		r, err := sw.SweepUntil(ctx(t), w.clock.Now(), nil)
		if err != nil || !r.Complete || r.Expired != 1 || r.Deleted != 0 {
			t.Fatalf("sweep: %+v %v; want the old record scanned, its delete refused (the new record replaced it)", r, err)
		}
		w.heal(t)
		for range 3 {
			w.clock.Advance(time.Second)
			if err := w.rep.Sync(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateCompleted || rec.CreatedAt.Before(anew) {
			t.Fatalf("converged on %s created %s; want eu's new completed record (created %s)", rec.State, rec.CreatedAt, anew)
		}
		for _, l := range []*fencedLedger{leu, lus} {
			if res, err := l.do(eff); err != nil || !res.Replayed || w.prov.Requests() != 2 {
				t.Fatalf("%s: a duplicate of the new delivery: %+v, %v, provider requests %d; want it replayed, 2 requests (once per retention period)",
					l.region, res, err, w.prov.Requests())
			}
		}
	})

	t.Run("TTL in a replica", func(t *testing.T) {
		w, eff, leu, lus := newFencedTTLWorld(t)
		if res, err := leu.do(eff); err != nil || res.Replayed || w.prov.Requests() != 2 {
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
			t.Fatalf("the home region's new record survived the other replica's TTL delete: %v; update MULTI_REGION.md and this test", decodeEffect(t, it))
		}
		for _, l := range []*fencedLedger{leu, lus} {
			res, err := l.do(eff) // a duplicate of the new delivery
			if !errors.Is(err, ledger.ErrPassHeld) || res.Replayed || w.prov.Requests() != 2 {
				t.Fatalf("%s: a duplicate of the new delivery: %+v, %v, provider requests %d; want refused by the pass held (the outcome lost), nothing sent",
					l.region, res, err, w.prov.Requests())
			}
		}
		v, err := leu.l.ShowEffect(ctx(t), eff.Identity.EffectID)
		if err != nil || v.State != ledger.EffectPending {
			t.Fatalf("the effect after its record was lost: %+v, %v; want pending (released, nothing escaped)", v, err)
		}
		for _, as := range []ledger.Settlement{ledger.Delivered, ledger.NotDelivered} {
			if _, err := leu.l.Resolve(ctx(t), eff.Identity.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: v.Rev}); !errors.Is(err, ledger.ErrNotEscaped) {
				t.Fatalf("resolve as %s: %v; want refused, not escaped", as, err)
			}
		}
	})
}

// fencedLedger is one region's executor ledger under fenced-effects (the
// home region's effects replica, the home region's fence) and its fence.
type fencedLedger struct {
	region string
	l      *ledger.Ledger
	o      *fence.Owner
	w      *twoRegions
}

func (f *fencedLedger) do(eff ledger.Effect) (ledger.Result, error) {
	return f.l.Do(context.Background(), eff, f.o.Guard(f.w.call))
}

// newFencedTTLWorld is two regions under fenced-effects, an effect
// delivered from the home region (eu) and replicated to us, and the clock
// past the record's and its fence item's retention.
func newFencedTTLWorld(t *testing.T) (*twoRegions, ledger.Effect, *fencedLedger, *fencedLedger) {
	w := newTwoRegions(t, fence.FencedEffects)
	fstore, err := fencedynamo.New(fencedynamo.Config{Client: w.p.db(eu), Table: w.p.emu[eu].CreateTable(t, "FenceTable")})
	if err != nil {
		t.Fatal(err)
	}
	in := func(r string) *fencedLedger {
		o, err := fence.New(fence.Config{Store: fstore, Region: r, Now: w.clock.Now, Metrics: w.rec})
		if err != nil {
			t.Fatal(err)
		}
		return &fencedLedger{region: r, l: w.homeLedger(t, r, o), o: o, w: w}
	}
	leu, lus := in(eu), in(us)
	eff := business(t, "refund-after-both-retentions")
	if _, err := leu.do(eff); err != nil {
		t.Fatal(err)
	}
	w.heal(t) // replicated to us
	w.clock.Advance(fence.DefaultRetention + time.Hour)
	return w, eff, leu, lus
}
