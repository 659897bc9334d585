package regionsim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
)

// three are the regions of the three-region tests, sorted by name (the
// replicator's tie-break between writes observed together: the last
// region's write is the newest).
var three = []string{ap, eu, us}

// threeRuns names the run each region's request creates, lowest first in
// the region order of perm (a permutation of three's indexes): the run of
// three[perm[0]] is the lowest.
func threeRuns(perm [3]int) map[string]string {
	names := []string{"acme/aaaa-run-0123456789", "acme/mmmm-run-0123456789", "acme/zzzz-run-0123456789"}
	out := map[string]string{}
	for rank, i := range perm {
		out[three[i]] = names[rank]
	}
	return out
}

var permutations = [][3]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}

// TestThreeRegionsLayer1ConvergesOnLowestRunID: under reconciled-records
// one Idempotency-Key and body sent to all three regions at once, during a
// partition, create three runs, one per region. Partitioned two ways: all
// three regions cut off from one another, or one region cut off from the
// two others (which keep replicating, and auditing, between themselves).
// Every order of the three runs' ids over the regions is tried. On
// healing, the auditors' write-backs converge every region's record on the
// lowest run id; every run that lost is recorded as a conflict won by the
// lowest run; a fourth request of the key in every region replays the
// lowest run's answer, and nothing runs again.
func TestThreeRegionsLayer1ConvergesOnLowestRunID(t *testing.T) {
	for i, perm := range permutations {
		for _, topo := range []string{"all cut off", "one cut off"} {
			isolated := three[i%3]
			name := strings.Join([]string{three[perm[0]], three[perm[1]], three[perm[2]]}, "<") + "/" + topo
			if topo == "one cut off" {
				name += " (" + isolated + ")"
			}
			t.Run(name, func(t *testing.T) {
				runOf := threeRuns(perm)
				low := runOf[three[perm[0]]]
				var runs atomic.Int32
				w := newAudited(t, auditedConfig{regions: three, handler: func(r string) http.HandlerFunc {
					return func(rw http.ResponseWriter, _ *http.Request) {
						runs.Add(1)
						rw.Header().Set("Content-Type", "application/json")
						rw.WriteHeader(http.StatusCreated)
						_, _ = io.WriteString(rw, `{"runId":"`+runOf[r]+`","status":"pending"}`)
					}
				}})
				if topo == "all cut off" {
					w.rep.SetPartitioned(true)
				} else {
					w.rep.Isolate(isolated, true)
				}
				var wg sync.WaitGroup
				for _, r := range three {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if resp, b := w.post(r); resp.StatusCode != http.StatusCreated || !strings.Contains(b, runOf[r]) {
							t.Errorf("%s during the partition: %d %s; want its own run", r, resp.StatusCode, b)
						}
					}()
				}
				wg.Wait()
				if t.Failed() {
					t.FailNow()
				}
				// The regions not cut off from each other replicate and
				// audit while the partition lasts.
				w.sync()
				w.heal(false)
				for _, r := range three {
					rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
					if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), low) {
						t.Errorf("%s's replica holds %s (%v); want the lowest run %s", r, body(&rec), err, low)
					}
				}
				for _, r := range three {
					resp, b := w.post(r)
					if resp.Header.Get("OpenWOP-Idempotent-Replay") != "true" || !strings.Contains(b, low) {
						t.Errorf("%s, a fourth request after healing: %d %s replay=%q; want the lowest run %s replayed",
							r, resp.StatusCode, b, resp.Header.Get("OpenWOP-Idempotent-Replay"), low)
					}
				}
				if n := runs.Load(); n != 3 {
					t.Errorf("handler ran %d times, want 3 (once per region during the partition)", n)
				}
				// Every run that lost is recorded as the loser of a
				// conflict, by some region, won by a lower run: the
				// lowest, or one that lost to it in turn (with three
				// regions an event may name such a run as its winner,
				// and a loss may be recorded in more than one region).
				events, _ := w.events()
				var got []string
				lost := map[string]bool{}
				records := map[string]bool{} // one key: one record reference in every region (docs/MULTI_REGION.md)
				for _, ev := range events {
					records[ev["record"].(string)] = true
					wr, _ := ev["winner"].(map[string]any)
					l, _ := ev["loser"].(map[string]any)
					win, lose := wr["run"].(string), l["run"].(string)
					got = append(got, ev["region"].(string)+": "+win+" over "+lose)
					if win >= lose {
						t.Errorf("event names %s as the winner over %s", win, lose)
					}
					lost[lose] = true
				}
				sort.Strings(got)
				for _, r := range three {
					if run := runOf[r]; run != low && !lost[run] {
						t.Errorf("%s's run %s lost with no conflict recorded; events:\n%s", r, run, strings.Join(got, "\n"))
					}
				}
				if lost[low] {
					t.Errorf("the lowest run is recorded as a loser; events:\n%s", strings.Join(got, "\n"))
				}
				if len(records) != 1 {
					t.Errorf("one key's conflict events name %d records %v, want one reference in every region", len(records), records)
				}
			})
		}
	}
}

// TestThreeRegionsLayer1ReconciledTTLDeleteWhileOneIsCutOff: under
// reconciled-records, TTL in one region while another is cut off. A key
// answered in eu replicates to all three regions; past its retention it is
// sent again in eu and claimed anew (a new run, rightly) while ap is cut
// off from both other regions. us's TTL deletes the old, expired item
// before eu's new record reaches it, and the deletion replicates to eu as
// the key's newest write; eu's auditor writes the new record back. Then
// ap, still cut off and still holding the old expired item, deletes it by
// its own TTL, after that write-back: on healing ap's deletion is the key's
// newest write and deletes the new record in eu and us once more; their
// auditors write it back again (each conditional on there being no item).
// Every region ends on the new run, a duplicate of the new request replays
// it in every region, and the handler ran once per retention period.
func TestThreeRegionsLayer1ReconciledTTLDeleteWhileOneIsCutOff(t *testing.T) {
	var runs atomic.Int32
	var w *audited
	w = newAudited(t, auditedConfig{regions: three, ttlRemoves: true,
		guardClock: func(string) idem.Clock {
			return idemtest.ClockFuncs{NowFunc: func() time.Time { return w.clock.Now() }}
		},
		handler: func(string) http.HandlerFunc {
			return func(rw http.ResponseWriter, _ *http.Request) {
				n := runs.Add(1)
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusCreated)
				_, _ = fmt.Fprintf(rw, `{"runId":"acme/run-%d","status":"pending"}`, n)
			}
		}})
	if r, b := w.post(eu); r.StatusCode != http.StatusCreated || !strings.Contains(b, "acme/run-1") {
		t.Fatalf("eu: %d %s", r.StatusCode, b)
	}
	w.sync()
	for _, r := range three {
		onlyRecord(t, w.p, r) // replicated everywhere
	}
	w.rep.Isolate(ap, true)
	w.clock.Advance(25 * time.Hour) // past the record's retention (24 h)
	if r, b := w.post(eu); r.StatusCode != http.StatusCreated || !strings.Contains(b, "acme/run-2") {
		t.Fatalf("eu, past the retention: %d %s; want a new run", r.StatusCode, b)
	}
	w.step(10 * time.Millisecond) // eu's new claim and completion observed, not yet applied
	ttlDelete := func(r string) {
		t.Helper()
		old := onlyRecord(t, w.p, r)
		if rec, err := idemdynamo.DecodeItem(old); err != nil || !strings.Contains(string(rec.Response.Body), "acme/run-1") {
			t.Fatalf("%s holds %s (%v); want the old, expired record", r, body(&rec), err)
		}
		if _, err := w.p.db(r).DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(w.p.tables[r]),
			Key: map[string]types.AttributeValue{"pk": old["pk"]}}); err != nil {
			t.Fatal(err)
		}
	}
	ttlDelete(us) // us's TTL: the old item, expired
	w.step(0)     // us's deletion observed, the key's newest write
	w.sync()      // eu and us: the deletion replicates, eu writes the new record back
	for _, r := range []string{eu, us} {
		if rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r)); err != nil || !strings.Contains(string(rec.Response.Body), "acme/run-2") {
			t.Fatalf("%s while ap is cut off holds %s (%v); want the new record written back", r, body(&rec), err)
		}
	}
	if w.restored[eu] != 1 || w.restored[us] != 0 {
		t.Fatalf("written back while ap is cut off: eu %d, us %d; want eu once", w.restored[eu], w.restored[us])
	}
	ttlDelete(ap) // ap's TTL, cut off: the old item, expired, after the write-back
	w.step(0)
	w.heal(false)
	if w.restored[eu] < 2 || w.restored[us] < 1 {
		t.Fatalf("written back after healing: eu %d, us %d in all; want ap's deletion written back in both", w.restored[eu], w.restored[us])
	}
	for _, r := range three {
		rec, err := idemdynamo.DecodeItem(onlyRecord(t, w.p, r))
		if err != nil || rec.Response == nil || !strings.Contains(string(rec.Response.Body), "acme/run-2") {
			t.Errorf("%s's replica holds %s (%v); want the new record naming acme/run-2", r, body(&rec), err)
		}
	}
	for _, r := range three {
		if resp, b := w.post(r); resp.Header.Get("OpenWOP-Idempotent-Replay") != "true" || !strings.Contains(b, "acme/run-2") {
			t.Errorf("%s: the new request again: %d %s; want a replay of acme/run-2", r, resp.StatusCode, b)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("the handler ran %d times; want twice (once per retention period)", n)
	}
}

// TestThreeRegionsFencedEffects: under fenced-effects, one effect claimed
// by executors in three regions, every pair of replicas partitioned: every
// region's executor claims in the home region's (eu) replica and takes its
// token from the home region's fence. eu claims, takes a token and stalls;
// us, past eu's lease, reclaims, takes a newer token and stalls too; ap,
// past us's lease, reclaims, takes the newest token, fires and records the
// outcome. The stalled owners then resume, us last: each is refused, at
// the fence (a stale token, one having passed) or by the record's owner
// condition. Then nine more executors, three per region, race for it. The
// provider sees one call; on healing the three replicas converge on the
// delivered call's record, and a later attempt in every region replays it.
func TestThreeRegionsFencedEffects(t *testing.T) {
	w := newRegionsWorld(t, fence.FencedEffects, three...)
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
	eff := business(t, "refund-three")
	w.rep.SetPartitioned(true)
	type stalledExec struct {
		stalled, release chan struct{}
		err              error
		done             chan struct{}
	}
	start := func(r string) *stalledExec {
		e := &stalledExec{stalled: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
		o := owner(r)
		var once sync.Once
		l := w.homeLedger(t, r, hookFencer{o, func() { once.Do(func() { close(e.stalled); <-e.release }) }})
		go func() { defer close(e.done); _, e.err = l.Do(context.Background(), eff, o.Guard(w.call)) }()
		<-e.stalled
		return e
	}
	euExec := start(eu)
	if _, err := w.homeLedger(t, ap, owner(ap)).Do(ctx(t), eff, owner(ap).Guard(w.call)); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("ap while eu's claim is live: %v, want ErrInFlight", err)
	}
	w.clock.Advance(31 * time.Second) // eu's claim outlives its lease
	usExec := start(us)
	w.clock.Advance(31 * time.Second) // us's claim outlives its lease
	oap := owner(ap)
	if res, err := w.homeLedger(t, ap, oap).Do(ctx(t), eff, oap.Guard(w.call)); err != nil || res.Replayed {
		t.Fatalf("ap past us's lease: %+v, %v; want it fired", res, err)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*stalledExec{euExec, usExec} {
		close(e.release)
		<-e.done
		if !errors.Is(e.err, ledger.ErrStaleFence) && !errors.Is(e.err, ledger.ErrLeaseLost) && !errors.Is(e.err, fence.ErrStale) {
			t.Errorf("a stalled owner resumed: %v, want a stale fencing token or the claim lost", e.err)
		}
	}
	var wg sync.WaitGroup
	for i := range 9 {
		r := three[i%3]
		o := owner(r)
		l := w.homeLedger(t, r, o)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, err := l.Do(context.Background(), eff, o.Guard(w.call)); err != nil || !res.Replayed {
				t.Errorf("%s racing after the outcome: %+v, %v; want the replay", r, res, err)
			}
		}()
	}
	wg.Wait()
	if n := w.prov.Requests(); n != 1 {
		t.Fatalf("provider saw %d calls, want exactly 1", n)
	}
	w.heal(t)
	if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateCompleted || rec.Outcome == nil || !rec.Outcome.OK {
		t.Fatalf("converged record %+v, want the delivered call's success", rec)
	}
	if len(w.events) != 0 {
		t.Fatalf("conflict events = %+v, want none: only the home region writes effect records", w.events)
	}
	for _, r := range three {
		o := owner(r)
		if res, err := w.homeLedger(t, r, o).Do(ctx(t), eff, o.Guard(w.call)); err != nil || !res.Replayed {
			t.Fatalf("%s, a later attempt: %+v, %v, want the replay", r, res, err)
		}
	}
	if n := w.prov.Requests(); n != 1 {
		t.Fatalf("provider saw %d calls after healing, want exactly 1", n)
	}
}

// TestThreeRegionsFencedRacingExecutors: under fenced-effects, twelve
// executors in three regions, every pair of replicas partitioned, race for
// one effect: exactly one provider call; every other executor is refused
// at the fence, sees the claim in flight, or replays the outcome.
func TestThreeRegionsFencedRacingExecutors(t *testing.T) {
	w := newRegionsWorld(t, fence.FencedEffects, three...)
	fstore, err := fencedynamo.New(fencedynamo.Config{Client: w.p.db(eu), Table: w.p.emu[eu].CreateTable(t, "FenceTable")})
	if err != nil {
		t.Fatal(err)
	}
	eff := business(t, "refund-three-racing")
	w.rep.SetPartitioned(true)
	var wg sync.WaitGroup
	for i := range 12 {
		r := three[i%3]
		o, err := fence.New(fence.Config{Store: fstore, Region: r, Now: w.clock.Now, Metrics: w.rec})
		if err != nil {
			t.Fatal(err)
		}
		l := w.homeLedger(t, r, o)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Do(context.Background(), eff, o.Guard(w.call))
			if err != nil && !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrIssued) &&
				!errors.Is(err, ledger.ErrInFlight) && !errors.Is(err, ledger.ErrLeaseLost) {
				t.Errorf("%s: unexpected: %v", r, err)
			}
		}()
	}
	wg.Wait()
	if n := w.prov.Requests(); n != 1 {
		t.Fatalf("provider saw %d calls, want exactly 1", n)
	}
	w.heal(t)
	w.converged(t, eff.Identity.EffectID)
}

// TestThreeRegionsReleasesOverACompletionAreWrittenBack: under
// reconciled-records, every pair of regions partitioned, one effect is
// claimed in all three regions, one after the other: one region's call is
// delivered and recorded, the two others' calls are refused before they
// leave (ledger.NotSent) and their claims released. Whichever region
// delivered (first, second or last in time), every region ends on the
// completed record once healed, and a duplicate in every region replays
// it: one provider call. (Replication alone keeps the newest write, a
// release unless the delivered call was last, and a duplicate would
// reclaim it and call the provider again.)
func TestThreeRegionsReleasesOverACompletionAreWrittenBack(t *testing.T) {
	for i, delivered := range three {
		t.Run(delivered+" delivers, "+[]string{"first", "second", "last"}[i], func(t *testing.T) {
			w := newRegionsWorld(t, fence.ReconciledRecords, three...)
			auditErr := w.effectRestoringAuditors(t, false)
			eff := business(t, "refund-released-three")
			refused := func(context.Context, ledger.Call) ([]byte, error) {
				return nil, ledger.NotSent(errors.New("connection refused"))
			}
			w.rep.SetPartitioned(true)
			for _, r := range three {
				l := w.ledger(t, r, nil)
				if r == delivered {
					if res, err := l.Do(ctx(t), eff, w.call); err != nil || res.Replayed {
						t.Fatalf("%s: %+v, %v; want its call delivered", r, res, err)
					}
				} else if _, err := l.Do(ctx(t), eff, refused); !errors.Is(err, ledger.ErrNotSent) {
					t.Fatalf("%s, its call refused: %v, want ledger.ErrNotSent", r, err)
				}
				if _, err := w.rep.Step(ctx(t)); err != nil { // observed, not delivered
					t.Fatal(err)
				}
				w.clock.Advance(10 * time.Millisecond)
			}
			w.heal(t)
			for range 3 { // the write-backs replicate
				w.clock.Advance(time.Second)
				if err := w.rep.Sync(ctx(t)); err != nil {
					t.Fatal(err)
				}
			}
			if *auditErr != nil {
				t.Fatal(*auditErr)
			}
			if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateCompleted {
				t.Fatalf("converged on %s attempt %d; want %s's completed record", rec.State, rec.Attempt, delivered)
			}
			for _, r := range three {
				res, err := w.ledger(t, r, nil).Do(ctx(t), eff, w.call) // a duplicate after healing
				if err != nil || !res.Replayed || w.prov.Requests() != 1 {
					t.Fatalf("%s, a duplicate after healing: %+v, %v; provider requests %d; want the delivered call replayed",
						r, res, err, w.prov.Requests())
				}
			}
		})
	}
}

// TestThreeRegionsPartitionReconciledRecords: under reconciled-records,
// every pair of regions partitioned, one effect is claimed and fired in
// all three regions (MREC conditions are local): three provider calls,
// which the provider deduplicates on the stable key to one effect. On
// healing every region converges on one completed record, a conflict is
// recorded for each region's claim that lost, and a duplicate in every
// region replays the outcome and fires nothing.
func TestThreeRegionsPartitionReconciledRecords(t *testing.T) {
	w := newRegionsWorld(t, fence.ReconciledRecords, three...)
	auditErr := w.effectRestoringAuditors(t, false)
	eff := business(t, "refund-three-fired")
	w.rep.SetPartitioned(true)
	for _, r := range three {
		if res, err := w.ledger(t, r, nil).Do(ctx(t), eff, w.call); err != nil || res.Replayed {
			t.Fatalf("%s during the partition: %+v, %v; want a local win", r, res, err)
		}
		if _, err := w.rep.Step(ctx(t)); err != nil {
			t.Fatal(err)
		}
		w.clock.Advance(10 * time.Millisecond)
	}
	w.heal(t)
	for range 3 {
		w.clock.Advance(time.Second)
		if err := w.rep.Sync(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if *auditErr != nil {
		t.Fatal(*auditErr)
	}
	if w.prov.Requests() != 3 || w.prov.Effects() != 1 {
		t.Fatalf("provider requests=%d effects=%d; want 3 calls deduplicated to 1 effect", w.prov.Requests(), w.prov.Effects())
	}
	rec := w.converged(t, eff.Identity.EffectID)
	if rec.State != ledger.StateCompleted {
		t.Fatalf("converged record state %s", rec.State)
	}
	// Two claims lost: each is recorded by a region whose replica it
	// was overwritten in (possibly by more than one region).
	if n := w.count(conflictaudit.MetricConflicts); n < 2 {
		t.Errorf("%d conflicts recorded for three regions' claims of one effect; want at least 2", n)
	}
	for _, r := range three {
		if res, err := w.ledger(t, r, nil).Do(ctx(t), eff, w.call); err != nil || !res.Replayed {
			t.Fatalf("%s after healing: %+v, %v; want the replay", r, res, err)
		}
	}
	if w.prov.Requests() != 3 {
		t.Fatal("a duplicate after healing reached the provider")
	}
}
