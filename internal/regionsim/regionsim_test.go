package regionsim_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const (
	eu = "eu-west-1" // the fence table's home region
	us = "us-east-1"
	ap = "ap-southeast-2" // the third region of the three-region tests
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// pair is one logical table in moto regions of one server: eu and us
// (newPair), or the regions newReplicas was given.
type pair struct {
	names  []string // the regions, in the order given
	emu    map[string]*dynamotest.Emulator
	tables map[string]string
}

func newPair(t *testing.T, logicalID string) *pair { return newReplicas(t, logicalID, eu, us) }

// newReplicas is one logical table in each of regions.
func newReplicas(t *testing.T, logicalID string, regions ...string) *pair {
	e := dynamotest.Start(t, dynamotest.Moto) // the only emulator with streams
	p := &pair{names: regions, emu: map[string]*dynamotest.Emulator{}, tables: map[string]string{}}
	for _, r := range regions {
		p.emu[r] = e.InRegion(r)
		p.tables[r] = p.emu[r].CreateTable(t, logicalID)
	}
	return p
}

// replicas are the regionsim regions of every replica, for Config.Regions.
func (p *pair) replicas() []regionsim.Region {
	var out []regionsim.Region
	for _, r := range p.names {
		out = append(out, p.region(r))
	}
	return out
}

func (p *pair) db(r string) *dynamodb.Client { return p.emu[r].Client() }

func (p *pair) region(r string) regionsim.Region {
	return regionsim.Region{Name: r, DB: p.emu[r].Client(), Streams: p.emu[r].StreamsClient(), Table: p.tables[r]}
}

func updatedAt(img map[string]types.AttributeValue) (int64, bool) {
	n, ok := img["updatedAt"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return v, err == nil
}

func get(t *testing.T, db *dynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := db.GetItem(ctx(t), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }

// The replicator honours its lag, holds everything during a partition, and
// resolves conflicting writes last-writer-wins on healing.
func TestReplicatorLagPartitionLWW(t *testing.T) {
	p := newPair(t, "EffectsTable")
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	rep, err := newReplicator(t, regionsim.Config{A: p.region(eu), B: p.region(us), KeyAttrs: []string{"pk", "sk"},
		Lag: 2 * time.Second, Timestamp: updatedAt, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	key := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s(k), "sk": s("record")}
	}
	put := func(r, k, v string, ts int) {
		item := key(k)
		item["v"], item["updatedAt"] = s(v), n(ts)
		if _, err := p.db(r).PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(p.tables[r]), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	put(eu, "k1", "from-eu", 1)
	if _, err := rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if get(t, p.db(us), p.tables[us], key("k1")) != nil {
		t.Fatal("replicated before the lag elapsed")
	}
	clock.Advance(2 * time.Second)
	if err := rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if it := get(t, p.db(us), p.tables[us], key("k1")); it == nil || it["v"].(*types.AttributeValueMemberS).Value != "from-eu" {
		t.Fatalf("us k1 = %v", it)
	}

	rep.SetPartitioned(true)
	put(eu, "k2", "eu-later", 20)
	put(us, "k2", "us-earlier", 10)
	clock.Advance(time.Minute)
	if err := rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if rep.Pending() != 2 {
		t.Fatalf("pending during partition = %d, want 2", rep.Pending())
	}
	rep.SetPartitioned(false)
	if err := rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if rep.Pending() != 2 {
		t.Fatalf("pending right after healing = %d, want 2 (lag)", rep.Pending())
	}
	clock.Advance(2 * time.Second)
	if err := rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{eu, us} {
		if it := get(t, p.db(r), p.tables[r], key("k2")); it["v"].(*types.AttributeValueMemberS).Value != "eu-later" {
			t.Fatalf("%s k2 = %v, want the last writer's", r, it["v"])
		}
	}
	if _, discarded := rep.Stats(); discarded != 1 {
		t.Fatalf("discarded = %d, want 1 (the LWW loser)", discarded)
	}
}

// decodeEffect decodes a stream image of the effects table with the
// ledger's own decoder (ledger/dynamostore.DecodeRecord), so the audit sees
// exactly what the Store wrote; nil for a missing image or a run reference.
func decodeEffect(t *testing.T, img map[string]types.AttributeValue) *ledger.Record {
	r, err := ledgerdynamo.DecodeRecord(img)
	if errors.Is(err, ledgerdynamo.ErrNotRecord) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// twoRegions is the partition-test world: the effects table in eu and us
// joined by the replicator, one auditor per region on its stream.
type twoRegions struct {
	p        *pair
	rep      *regionsim.Replicator
	clock    *ledgertest.Clock
	prov     *ledgertest.Provider
	metrics  *bytes.Buffer
	rec      *emf.Recorder
	mu       sync.Mutex
	auditors map[string]*conflictaudit.Auditor
	events   []*conflictaudit.Conflict
	// audit, where set for a region, reads that region's changes in place
	// of its conflict auditor (an auditfn.Auditor over it).
	audit map[string]func(changeRecord)
}

// changeRecord is one stream change the replicator observed.
type changeRecord = regionsim.Change

func newTwoRegions(t *testing.T, strategy fence.CrossRegion) *twoRegions {
	return newRegionsWorld(t, strategy, eu, us)
}

// newRegionsWorld is the partition-test world in regions (eu the home
// region): a twoRegions of as many regions.
func newRegionsWorld(t *testing.T, strategy fence.CrossRegion, regions ...string) *twoRegions {
	w := &twoRegions{p: newReplicas(t, "EffectsTable", regions...), clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)),
		prov: ledgertest.NewProvider(t), metrics: &bytes.Buffer{}, auditors: map[string]*conflictaudit.Auditor{},
		audit: map[string]func(changeRecord){}}
	w.rec = emf.New(w.metrics, "idemkit")
	for _, r := range regions {
		a, err := conflictaudit.New(conflictaudit.Config{Strategy: strategy, Region: r, Metrics: w.rec})
		if err != nil {
			t.Fatal(err)
		}
		w.auditors[r] = a
	}
	rep, err := newReplicator(t, regionsim.Config{Regions: w.p.replicas(), KeyAttrs: []string{"pk", "sk"},
		Lag: 500 * time.Millisecond, Timestamp: updatedAt, Now: w.clock.Now,
		OnChange: func(c regionsim.Change) {
			if f := w.audit[c.Region]; f != nil {
				f(c)
				return
			}
			if ev := w.auditors[c.Region].Observe(decodeEffect(t, c.Old), decodeEffect(t, c.New)); ev != nil {
				w.mu.Lock()
				w.events = append(w.events, ev)
				w.mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.rep = rep
	return w
}

func (w *twoRegions) ledger(t *testing.T, r string, f ledger.Fencer) *ledger.Ledger {
	return w.ledgerOn(t, w.p.db(r), w.p.tables[r], f)
}

// ledgerOn is an executor's ledger whose store is table through client.
func (w *twoRegions) ledgerOn(t *testing.T, client *dynamodb.Client, table string, f ledger.Fencer) *ledger.Ledger {
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second,
		Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}, Fencer: f, Metrics: w.rec})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// homeLedger is region r's executor ledger under fenced-effects, wired as
// functions/host/kit does: its store is the home region's (eu) replica of
// the effects table through kit.HomeClient, so every claim, fire mark and
// outcome is a conditional write there, never a write to r's own replica.
func (w *twoRegions) homeLedger(t *testing.T, r string, f ledger.Fencer) *ledger.Ledger {
	return w.ledgerOn(t, kit.HomeClient(w.p.db(r), eu), w.p.tables[eu], f)
}

func (w *twoRegions) heal(t *testing.T) {
	if _, err := w.rep.Step(ctx(t)); err != nil { // observe what is left
		t.Fatal(err)
	}
	w.rep.SetPartitioned(false)
	w.clock.Advance(time.Second) // past the lag
	if err := w.rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// converged asserts every replica holds the same effect item.
func (w *twoRegions) converged(t *testing.T, effectID string) *ledger.Record {
	key := map[string]types.AttributeValue{"pk": s("effect#" + effectID), "sk": s("record")}
	ra := decodeEffect(t, get(t, w.p.db(w.p.names[0]), w.p.tables[w.p.names[0]], key))
	for _, r := range w.p.names[1:] {
		rb := decodeEffect(t, get(t, w.p.db(r), w.p.tables[r], key))
		if ra == nil || rb == nil || ra.Owner != rb.Owner || ra.State != rb.State || ra.Attempt != rb.Attempt {
			t.Fatalf("replicas diverge:\n %s %+v\n %s %+v", w.p.names[0], ra, r, rb)
		}
	}
	return ra
}

func (w *twoRegions) count(metric string) int {
	return strings.Count(w.metrics.String(), `"`+metric+`":1`)
}

func business(t *testing.T, key string) ledger.Effect {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Effect{Identity: id}
}

func (w *twoRegions) call(ctx context.Context, c ledger.Call) ([]byte, error) {
	return w.prov.Call(ctx, c.ProviderKey, "refund 10 EUR")
}

// reconciled-records: during a partition the same effect is claimed and
// fired in both regions (MREC conditions are local). The provider
// deduplicates by the stable key and performs one effect; on healing the
// records converge and the audit records exactly one conflict.
func TestPartitionReconciledRecords(t *testing.T) {
	w := newTwoRegions(t, fence.ReconciledRecords)
	eff := business(t, "refund-1")
	leu, lus := w.ledger(t, eu, nil), w.ledger(t, us, nil)
	w.rep.SetPartitioned(true)
	if _, err := leu.Do(ctx(t), eff, w.call); err != nil {
		t.Fatal(err)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil { // eu's writes are observed, not delivered
		t.Fatal(err)
	}
	resUS, err := lus.Do(ctx(t), eff, w.call)
	if err != nil || resUS.Replayed {
		t.Fatalf("us Do during partition = %+v, %v; want a second, local win", resUS, err)
	}
	w.heal(t)
	if w.prov.Requests() != 2 || w.prov.Effects() != 1 {
		t.Fatalf("provider requests=%d effects=%d; want 2 calls deduplicated to 1 effect", w.prov.Requests(), w.prov.Effects())
	}
	rec := w.converged(t, eff.Identity.EffectID)
	if rec.State != ledger.StateCompleted {
		t.Fatalf("converged record state %s", rec.State)
	}
	if len(w.events) != 1 || w.count(conflictaudit.MetricConflicts) != 1 {
		t.Fatalf("conflict events = %d (metric %d), want exactly 1", len(w.events), w.count(conflictaudit.MetricConflicts))
	}
	ev := w.events[0]
	if ev.Strategy != fence.ReconciledRecords || ev.Region != eu || !ev.Loser.FireMarked || ev.Winner.Owner == ev.Loser.Owner {
		t.Fatalf("event = %+v", ev)
	}
	// After convergence a duplicate in either region replays; nothing fires.
	for _, l := range []*ledger.Ledger{leu, lus} {
		if res, err := l.Do(ctx(t), eff, w.call); err != nil || !res.Replayed {
			t.Fatalf("after healing: %+v, %v", res, err)
		}
	}
	if w.prov.Requests() != 2 {
		t.Fatal("a duplicate after healing reached the provider")
	}
}

type hookFencer struct {
	*fence.Owner
	after func()
}

func (h hookFencer) Token(ctx context.Context, id string) (uint64, error) {
	tok, err := h.Owner.Token(ctx, id)
	h.after()
	return tok, err
}

// fenced-effects: the same partition, with a fence table in the home
// region (eu), and the effect records decided there too (homeLedger, as
// the kit wires them). The eu executor claims, takes its token and stalls;
// the us executor finds the claim live (it is the home region's record,
// whatever the replication between the replicas) and fires nothing until
// the claim's lease ends; it then reclaims, takes a newer token, fires
// and records the outcome. The stale eu executor is rejected at the fence
// and its late write refused by the record's owner condition. On healing
// both replicas hold the completed record of the call that reached the
// provider, and a later Do in either region replays it. (With the records
// written in each region's own replica, as before, the stale owner's
// release could replicate over the completed record, the last writer
// winning: every later Do was then refused by the fence, and the run of a
// delivered effect ended failed.)
func TestPartitionFencedEffects(t *testing.T) {
	w := newTwoRegions(t, fence.FencedEffects)
	fenceTable := w.p.emu[eu].CreateTable(t, "FenceTable")                                    // home region only
	fstore, err := fencedynamo.New(fencedynamo.Config{Client: w.p.db(eu), Table: fenceTable}) // both regions call the home region
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
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	leu := w.homeLedger(t, eu, hookFencer{oeu, func() { once.Do(func() { close(stalled); <-release }) }})
	lus := w.homeLedger(t, us, ous)
	eff := business(t, "refund-2")

	w.rep.SetPartitioned(true)
	var euErr error
	done := make(chan struct{})
	go func() { defer close(done); _, euErr = leu.Do(context.Background(), eff, oeu.Guard(w.call)) }()
	<-stalled
	if _, err := lus.Do(ctx(t), eff, ous.Guard(w.call)); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("us Do while eu's claim is live: %v, want ErrInFlight (one record, in the home region)", err)
	}
	w.clock.Advance(31 * time.Second) // eu's claim outlives its lease
	res, err := lus.Do(ctx(t), eff, ous.Guard(w.call))
	if err != nil || res.Replayed {
		t.Fatalf("us Do after eu's lease = %+v, %v", res, err)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil { // us's writes are observed first
		t.Fatal(err)
	}
	w.clock.Advance(time.Second)
	close(release) // the stale eu executor writes last
	<-done
	if !errors.Is(euErr, ledger.ErrStaleFence) && !errors.Is(euErr, ledger.ErrLeaseLost) {
		t.Fatalf("stale eu owner: %v, want a stale fencing token or the claim lost", euErr)
	}
	if w.prov.Requests() != 1 {
		t.Fatalf("provider saw %d calls, want exactly 1", w.prov.Requests())
	}
	if got := w.count(fence.MetricStaleFence); got != 1 {
		t.Fatalf("%s = %d, want 1", fence.MetricStaleFence, got)
	}
	w.heal(t)
	if rec := w.converged(t, eff.Identity.EffectID); rec.State != ledger.StateCompleted || rec.Outcome == nil || !rec.Outcome.OK {
		t.Fatalf("converged record %+v outcome %+v, want the delivered call's success", rec, rec.Outcome)
	}
	if len(w.events) != 0 {
		t.Fatalf("conflict events = %+v, want none: only the home region writes effect records", w.events)
	}
	// A later attempt, in either region, replays the outcome: never fires,
	// never refused.
	for _, l := range []struct {
		l *ledger.Ledger
		o *fence.Owner
	}{{leu, oeu}, {lus, ous}} {
		if res, err := l.l.Do(ctx(t), eff, l.o.Guard(w.call)); err != nil || !res.Replayed {
			t.Fatalf("later Do = %+v, %v, want the replay", res, err)
		}
	}
	if w.prov.Requests() != 1 {
		t.Fatal("a later attempt reached the provider")
	}
}

// Racing executors in both partitioned regions, on DynamoDB: exactly one
// provider call; every other executor is rejected (stale), refused (issued)
// or sees the claim in flight or completed.
func TestPartitionRacingFencedExecutors(t *testing.T) {
	w := newTwoRegions(t, fence.FencedEffects)
	fstore, err := fencedynamo.New(fencedynamo.Config{Client: w.p.db(eu), Table: w.p.emu[eu].CreateTable(t, "FenceTable")})
	if err != nil {
		t.Fatal(err)
	}
	eff := business(t, "refund-3")
	w.rep.SetPartitioned(true)
	type exec struct {
		l *ledger.Ledger
		o *fence.Owner
	}
	var execs []exec
	for i := range 8 {
		r := []string{eu, us}[i%2]
		o, err := fence.New(fence.Config{Store: fstore, Region: r, Now: w.clock.Now, Metrics: w.rec})
		if err != nil {
			t.Fatal(err)
		}
		execs = append(execs, exec{w.homeLedger(t, r, o), o})
	}
	var wg sync.WaitGroup
	for _, e := range execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.l.Do(context.Background(), eff, e.o.Guard(w.call))
			if err != nil && !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrIssued) &&
				!errors.Is(err, ledger.ErrInFlight) && !errors.Is(err, ledger.ErrLeaseLost) {
				t.Errorf("unexpected: %v", err)
			}
		}()
	}
	wg.Wait()
	if w.prov.Requests() != 1 {
		t.Fatalf("provider saw %d calls, want exactly 1", w.prov.Requests())
	}
	w.heal(t)
	w.converged(t, eff.Identity.EffectID)
}

// layer1 is Layer 1 (idem.Guard over idem/dynamostore) in front of a
// handler in two regions whose idempotency tables the replicator joins.
//
// Not pinned (reconciled-records): each region's Guard uses its own
// replica. Pinned (fenced-effects, functions/host/kit): each region's Guard
// uses kit.HomeClient(its client, eu), so every claim, completion and
// replay goes to the home region's replica, as the api function does with
// IDEMPOTENCY_TABLE_REGION. cut is the network between us and eu.
type layer1 struct {
	t     *testing.T
	p     *pair
	rep   *regionsim.Replicator
	clock *ledgertest.Clock
	runs  atomic.Int32
	srv   map[string]*httptest.Server
	cut   *cut
}

// cut is an HTTP client for the us region's DynamoDB clients that, while
// on, refuses every request signed for region (its SigV4 credential scope
// names it) with a network error: a partition between us and that region,
// while us's own replica stays reachable.
type cut struct {
	region  string
	on      atomic.Bool
	refused atomic.Int32
}

func (c *cut) Do(req *http.Request) (*http.Response, error) {
	if c.on.Load() && strings.Contains(req.Header.Get("Authorization"), "/"+c.region+"/dynamodb/") {
		c.refused.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("network is unreachable (simulated partition)")}
	}
	return http.DefaultClient.Do(req)
}

func newLayer1(t *testing.T, pinned bool) *layer1 {
	w := &layer1{t: t, p: newPair(t, "IdempotencyTable"), clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)),
		srv: map[string]*httptest.Server{}, cut: &cut{region: eu}}
	rep, err := newReplicator(t, regionsim.Config{A: w.p.region(eu), B: w.p.region(us), Lag: time.Second, Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.rep = rep
	handler := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		n := w.runs.Add(1)
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(rw, `{"runId":"acme/run-`+strconv.Itoa(int(n))+`-0123456789abcdef"}`)
	})
	for _, r := range []string{eu, us} {
		client := w.p.emu[r].Client(dynamotest.FastRetries)
		if r == us {
			client = w.p.emu[r].Client(dynamotest.FastRetries, func(o *dynamodb.Options) { o.HTTPClient = w.cut })
		}
		table := w.p.tables[r]
		if pinned {
			// The api function's wiring under fenced-effects: the home
			// region's replica, by the name the home stack created (a
			// global table has one name in every region).
			client, table = kit.HomeClient(client, eu), w.p.tables[eu]
		}
		st, err := idemdynamo.New(idemdynamo.Config{Client: client, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Store: st,
			HTTPTenant: func(*http.Request) (string, bool) { return "acme", true },
			Logger:     slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /runs", g.Middleware(handler))
		w.srv[r] = httptest.NewServer(mux)
		t.Cleanup(w.srv[r].Close)
	}
	return w
}

const key1 = "0f8fad5b-d9cb-469f-a165-70867728950e"

func (w *layer1) post(r string) (*http.Response, string) { return w.postKey(r, key1) }

func (w *layer1) postKey(r, key string) (*http.Response, string) {
	req, _ := http.NewRequest(http.MethodPost, w.srv[r].URL+"/runs", strings.NewReader(`{"workflow":"w1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idem.HeaderKey, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// items returns the number of items in region r's replica.
func (w *layer1) items(r string) int {
	out, err := w.p.db(r).Scan(ctx(w.t), &dynamodb.ScanInput{TableName: aws.String(w.p.tables[r]), ConsistentRead: aws.Bool(true)})
	if err != nil {
		w.t.Fatal(err)
	}
	return len(out.Items)
}

func isReplay(resp *http.Response) bool {
	return resp.Header.Get("OpenWOP-Idempotent-Replay") == "true"
}

// fenced-effects, Layer 1 pinned to the home region (eu): a key replayed
// into the second region BEFORE the first region's record has replicated —
// within the lag, and with replication stopped altogether — resolves to the
// first region's response, marked as a replay; the handler runs once. The
// same holds with the regions swapped (first request in the non-home
// region), and for parallel duplicates spread over both regions. The
// records still replicate for durability.
func TestLayer1HomePinnedReplayWithinLag(t *testing.T) {
	w := newLayer1(t, true)
	first, body := w.post(eu)
	if first.StatusCode != http.StatusCreated || isReplay(first) {
		t.Fatalf("first: %d %s", first.StatusCode, body)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil { // observed, not yet applied (lag)
		t.Fatal(err)
	}
	if n := w.items(us); n != 0 {
		t.Fatalf("us replica holds %d items before the lag elapsed: the test would not be within the lag", n)
	}
	second, body2 := w.post(us)
	if second.StatusCode != http.StatusCreated || body2 != body || !isReplay(second) {
		t.Fatalf("replay in us within the lag: %d %q replay=%v; want eu's %q replayed", second.StatusCode, body2, isReplay(second), body)
	}
	if w.runs.Load() != 1 {
		t.Fatalf("handler ran %d times across regions, want 1", w.runs.Load())
	}

	// Replication stopped (partitioned replicator), both regions still
	// reach the home region: first request in us, replay in eu.
	w.rep.SetPartitioned(true)
	const key2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	a, bodyA := w.postKey(us, key2)
	b, bodyB := w.postKey(eu, key2)
	if a.StatusCode != http.StatusCreated || isReplay(a) || b.StatusCode != http.StatusCreated || bodyB != bodyA || !isReplay(b) {
		t.Fatalf("us then eu, no replication: %d %q / %d %q replay=%v", a.StatusCode, bodyA, b.StatusCode, bodyB, isReplay(b))
	}
	if w.runs.Load() != 2 {
		t.Fatalf("handler ran %d times for two keys, want 2", w.runs.Load())
	}

	// Parallel duplicates of a third key in both regions: one execution;
	// every other answer is the same response replayed or 409 in flight.
	const key3 = "a8098c1a-f86e-41d4-a56a-7e9f1c6b1b3e"
	var wg sync.WaitGroup
	var mu sync.Mutex
	bodies := map[string]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, body := w.postKey([]string{eu, us}[i%2], key3)
			mu.Lock()
			defer mu.Unlock()
			switch resp.StatusCode {
			case http.StatusCreated:
				bodies[body]++
			case http.StatusConflict:
				if !strings.Contains(body, "idempotency_in_flight") {
					t.Errorf("409 %s", body)
				}
			default:
				t.Errorf("parallel duplicate: %d %s", resp.StatusCode, body)
			}
		}()
	}
	wg.Wait()
	if w.runs.Load() != 3 || len(bodies) != 1 {
		t.Fatalf("parallel duplicates in two regions: handler runs %d (want 3 in total), distinct 201 bodies %v", w.runs.Load(), bodies)
	}

	// After replication the replicas converge on the home region's records.
	if _, err := w.rep.Step(ctx(t)); err != nil { // observe what is left
		t.Fatal(err)
	}
	w.rep.SetPartitioned(false)
	w.clock.Advance(2 * time.Second)
	if err := w.rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if ne, nu := w.items(eu), w.items(us); ne == 0 || ne != nu {
		t.Fatalf("replicas after sync: eu %d items, us %d", ne, nu)
	}
}

// fenced-effects, Layer 1 pinned to the home region (eu), during a
// partition that cuts us off from eu (replication stopped, us's requests
// to eu refused): a key eu already answered, and a brand-new key, both
// fail closed in us with 503 idemkit.store_unavailable and Retry-After (the
// home region's store cannot be reached; retrying is safe), the handler does
// not run, and nothing is written to us's own replica. After healing, the
// first key replays eu's response in us and the new key runs once.
func TestLayer1HomePinnedPartitionFailsClosed(t *testing.T) {
	w := newLayer1(t, true)
	first, body := w.post(eu)
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("first: %d %s", first.StatusCode, body)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	w.rep.SetPartitioned(true)
	w.cut.on.Store(true)
	const fresh = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	for _, key := range []string{key1, fresh} {
		resp, b := w.postKey(us, key)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(b, `"error":"idemkit.store_unavailable"`) || resp.Header.Get("Retry-After") == "" || isReplay(resp) {
			t.Fatalf("us during the partition: %d %s; want 503 idemkit.store_unavailable with Retry-After", resp.StatusCode, b)
		}
		if resp.Header.Get("OpenWOP-Idempotent-Replay") != "" {
			t.Fatal("a fail-closed answer carries the replay marker")
		}
	}
	if w.runs.Load() != 1 {
		t.Fatalf("handler ran %d times; the partitioned region started new work", w.runs.Load())
	}
	if w.cut.refused.Load() == 0 {
		t.Fatal("no request to the home region was refused: the partition was not exercised")
	}
	if n := w.items(us); n != 0 {
		t.Fatalf("us replica holds %d items: the partitioned region wrote locally", n)
	}
	// eu, the home region, keeps serving during the partition.
	if resp, b := w.post(eu); resp.StatusCode != http.StatusCreated || b != body || !isReplay(resp) {
		t.Fatalf("eu during the partition: %d %s", resp.StatusCode, b)
	}
	// ... new work included: a key first sent to eu runs there, once.
	const homeKey = "9a1c2d3e-4f50-4a6b-8c7d-0e1f2a3b4c5d"
	homeFirst, homeBody := w.postKey(eu, homeKey)
	if homeFirst.StatusCode != http.StatusCreated || isReplay(homeFirst) || w.runs.Load() != 2 {
		t.Fatalf("a new key in eu during the partition: %d %s, handler runs %d; want it run there", homeFirst.StatusCode, homeBody, w.runs.Load())
	}

	w.cut.on.Store(false)
	if _, err := w.rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	w.rep.SetPartitioned(false)
	w.clock.Advance(2 * time.Second)
	if err := w.rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if resp, b := w.post(us); resp.StatusCode != http.StatusCreated || b != body || !isReplay(resp) {
		t.Fatalf("us after healing: %d %q; want eu's %q replayed", resp.StatusCode, b, body)
	}
	freshResp, freshBody := w.postKey(us, fresh)
	if freshResp.StatusCode != http.StatusCreated || isReplay(freshResp) {
		t.Fatalf("new key after healing: %d %s", freshResp.StatusCode, freshBody)
	}
	// Runs once: its duplicates in either region, and the key eu ran
	// during the partition in us, replay.
	for _, d := range []struct{ region, key, body string }{{eu, fresh, freshBody}, {us, fresh, freshBody}, {us, homeKey, homeBody}} {
		if resp, b := w.postKey(d.region, d.key); resp.StatusCode != http.StatusCreated || b != d.body || !isReplay(resp) {
			t.Fatalf("duplicate in %s after healing: %d %q replay=%v; want %q replayed", d.region, resp.StatusCode, b, isReplay(resp), d.body)
		}
	}
	if w.runs.Load() != 3 {
		t.Fatalf("handler ran %d times, want 3 (one per key)", w.runs.Load())
	}
}

// The replay test. Layer 1 across regions: after replication, an
// Idempotency-Key replayed into the second region returns the first
// region's response, marked as a replay, and the handler does not run again.
func TestLayer1ReplayIntoSecondRegion(t *testing.T) {
	w := newLayer1(t, false)
	first, body := w.post(eu)
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("first: %d %s", first.StatusCode, body)
	}
	if _, err := w.rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if out, err := w.p.db(us).Scan(ctx(t), &dynamodb.ScanInput{TableName: aws.String(w.p.tables[us])}); err != nil || len(out.Items) != 0 {
		t.Fatalf("replicated before the lag: %v %v", out, err)
	}
	w.clock.Advance(time.Second)
	if err := w.rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	second, body2 := w.post(us)
	if second.StatusCode != http.StatusCreated || body2 != body || second.Header.Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay in us: %d %q replay=%q; want %q replayed", second.StatusCode, body2, second.Header.Get("OpenWOP-Idempotent-Replay"), body)
	}
	if w.runs.Load() != 1 {
		t.Fatalf("handler ran %d times across regions, want 1", w.runs.Load())
	}
}

// reconciled-records (Layer 1 on the local MREC replica, not home-pinned):
// what it does NOT guarantee across regions, and why that posture does not
// advertise multiRegion. The same key replayed into the second region
// before the first region's record has replicated — within the lag, or
// during a partition — starts new work there. On healing the replication
// alone converges last-writer-wins, so both regions then replay ONE of the
// two responses, and it need not be the one the first caller received (the
// conflict auditor makes it the lower run's:
// TestLayer1PartitionConvergesOnLowestRunID).
// (fenced-effects pins Layer 1 to the home region instead:
// TestLayer1HomePinnedReplayWithinLag.)
func TestLayer1ReplayWithinLagStartsNewWork(t *testing.T) {
	w := newLayer1(t, false)
	w.rep.SetPartitioned(true)
	first, body := w.post(eu)
	if _, err := w.rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(10 * time.Millisecond)
	second, body2 := w.post(us)
	if first.StatusCode != http.StatusCreated || second.StatusCode != http.StatusCreated || body2 == body ||
		second.Header.Get("OpenWOP-Idempotent-Replay") == "true" || w.runs.Load() != 2 {
		t.Fatalf("partitioned replay: %d %q / %d %q replay=%q runs=%d; want a second, independent execution",
			first.StatusCode, body, second.StatusCode, body2, second.Header.Get("OpenWOP-Idempotent-Replay"), w.runs.Load())
	}
	if _, err := w.rep.Step(ctx(t)); err != nil {
		t.Fatal(err)
	}
	w.rep.SetPartitioned(false)
	w.clock.Advance(2 * time.Second)
	if err := w.rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	_, again1 := w.post(eu)
	_, again2 := w.post(us)
	if again1 != again2 || (again1 != body && again1 != body2) || w.runs.Load() != 2 {
		t.Fatalf("after healing: eu %q us %q runs=%d; want one converged response", again1, again2, w.runs.Load())
	}
}
