package conflictaudit_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencememstore "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// recording is a ledger.Store that keeps every successful write, so the
// test can replay the stream of old/new images a real table would emit.
type recording struct {
	*memstore.Store
	mu      sync.Mutex
	changes [][2]*ledger.Record
}

func (r *recording) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	old, _ := r.Store.Get(ctx, rec.Key)
	won, cur, err := r.Store.Create(ctx, rec, now)
	if won {
		r.add(old, rec)
	}
	return won, cur, err
}

func (r *recording) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	old, _ := r.Store.Get(ctx, next.Key)
	ok, cur, err := r.Store.Replace(ctx, next, want, now)
	if ok {
		r.add(old, next)
	}
	return ok, cur, err
}

func (r *recording) add(old, cur *ledger.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, [2]*ledger.Record{old.Clone(), cur.Clone()})
}

func business(t *testing.T, key string) ledger.Effect {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Effect{Identity: id}
}

// Every transition the ledger itself makes (claim, fire mark, outcome,
// release, reclaim after lease expiry, escape, re-creation after retention)
// is NOT a conflict.
func TestLegitimateTransitionsAreNotConflicts(t *testing.T) {
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	st := &recording{Store: memstore.New()}
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("ok"), nil }
	_, _ = l.Do(ctx, business(t, "a"), ok)
	_, _ = l.Do(ctx, business(t, "a"), ok) // replay: no write
	_, _ = l.Do(ctx, business(t, "b"), func(context.Context, ledger.Call) ([]byte, error) { return nil, ledger.NotSent(errors.New("down")) })
	_, _ = l.Do(ctx, business(t, "b"), func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	})
	_, _ = l.Do(ctx, business(t, "b"), ok)
	// A crash while firing, then a reclaim after the lease.
	_, _ = l.Do(ctx, business(t, "c"), func(context.Context, ledger.Call) ([]byte, error) {
		clock.Advance(time.Minute)
		_, err := l.Do(ctx, business(t, "c"), ok) // another executor reclaims
		if err != nil {
			t.Error(err)
		}
		return []byte("late"), nil
	})
	// Past retention, the same identity is a new effect.
	clock.Advance(ledger.MinRetention + time.Hour)
	_, _ = l.Do(ctx, business(t, "a"), ok)

	a, _ := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords})
	if len(st.changes) < 10 {
		t.Fatalf("only %d changes recorded", len(st.changes))
	}
	for i, c := range st.changes {
		if got := a.Observe(c[0], c[1]); got != nil {
			t.Fatalf("change %d flagged: %+v", i, got)
		}
	}
}

func claim(owner string, attempt int, created time.Time, fired bool) *ledger.Record {
	r := &ledger.Record{Key: "effect#acme/x", Kind: identity.KindEffect, EffectID: "acme/x", State: ledger.StateClaimed,
		Owner: owner, Attempt: attempt, CreatedAt: created, ExpiresAt: created.Add(ledger.MinRetention)}
	for n := 1; n <= attempt; n++ {
		r.Attempts = append(r.Attempts, ledger.Attempt{N: n, State: ledger.AttemptClaimed, Fired: fired && n == attempt})
	}
	if fired {
		r.State = ledger.StateFiring
	}
	return r
}

func TestConflictsDetected(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name     string
		old, cur *ledger.Record
		reason   string
	}{
		{"both claimed attempt 1", claim("eu", 1, t0, true), claim("us", 1, t0.Add(time.Millisecond), true), "same-attempt-other-owner"},
		{"same ms, other owner", claim("eu", 1, t0, false), claim("us", 1, t0, false), "same-attempt-other-owner"},
		{"older lineage won", claim("eu", 3, t0, false), claim("us", 1, t0.Add(time.Second), false), "attempt-regressed"},
		{"independent lineage with more attempts", claim("eu", 1, t0, true), claim("us", 2, t0.Add(time.Second), true), "independent-creation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := conflictaudit.Detect(tc.old, tc.cur)
			if c == nil || c.Reason != tc.reason {
				t.Fatalf("Detect = %+v, want reason %s", c, tc.reason)
			}
			if c.Winner.Owner != tc.cur.Owner || c.Loser.Owner != tc.old.Owner {
				t.Fatalf("winner/loser swapped: %+v", c)
			}
		})
	}
	if conflictaudit.Detect(nil, claim("us", 1, t0, false)) != nil {
		t.Fatal("INSERT flagged")
	}
}

// The event carries no content and no key, and the metric has bounded
// dimensions only.
func TestEventIsContentFreeAndCounted(t *testing.T) {
	var logs, metrics bytes.Buffer
	a, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.FencedEffects, Region: "eu-west-1",
		Metrics: emf.New(&metrics, "idemkit"), Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	old, cur := claim("owner-token-eu", 1, t0, true), claim("owner-token-us", 1, t0, true)
	old.ProviderKey, cur.ProviderKey = "idemkit-secret-provider-key", "idemkit-secret-provider-key"
	old.Outcome = &ledger.Outcome{OK: true, Value: []byte("card 4111111111111111")}
	c := a.Observe(old, cur)
	if c == nil || c.Strategy != fence.FencedEffects || c.Region != "eu-west-1" {
		t.Fatalf("conflict = %+v", c)
	}
	for _, secret := range []string{"acme/x", "owner-token", "secret-provider-key", "4111111111111111"} {
		if strings.Contains(logs.String(), secret) || strings.Contains(metrics.String(), secret) {
			t.Fatalf("%q leaked:\n%s\n%s", secret, logs.String(), metrics.String())
		}
	}
	for _, want := range []string{`"winner"`, `"loser"`, `"strategy":"fenced-effects"`, `"effect":"kh:`} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("log lacks %s:\n%s", want, logs.String())
		}
	}
	if !strings.Contains(metrics.String(), `"`+conflictaudit.MetricConflicts+`":1`) ||
		!strings.Contains(metrics.String(), `"Dimensions":[["kind","region","strategy"]]`) {
		t.Fatalf("metric:\n%s", metrics.String())
	}
	// The same conflict once more with no dimension, the series the
	// stack's alarm watches.
	if !strings.Contains(metrics.String(), `"`+conflictaudit.MetricConflictsAll+`":1`) {
		t.Fatalf("no dimensionless count:\n%s", metrics.String())
	}
	if _, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.SingleRegion}); err == nil {
		t.Fatal("single-region accepted")
	}
}

// image round-trips r through the effects table's item shape, as a stream
// image reaches the auditor: dynamostore.EncodeRecord (what the store
// writes) and dynamostore.DecodeRecord (the one decoder of that shape).
func image(t *testing.T, r *ledger.Record) *ledger.Record {
	t.Helper()
	if r == nil {
		got, err := dynamostore.DecodeRecord(nil)
		if err != nil || got != nil {
			t.Fatalf("missing image decoded to %+v, %v", got, err)
		}
		return nil
	}
	av, err := dynamostore.EncodeRecord(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := dynamostore.DecodeRecord(av)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// The auditor decides the same on stream images decoded with
// dynamostore.DecodeRecord as on the records themselves: every conflict is
// still found, and no legitimate transition is flagged.
func TestDecodedStreamImages(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	pairs := [][2]*ledger.Record{
		{claim("eu", 1, t0, true), claim("us", 1, t0.Add(time.Millisecond), true)},
		{claim("eu", 3, t0, false), claim("us", 1, t0.Add(time.Second), false)},
		{claim("eu", 1, t0, true), claim("us", 2, t0.Add(time.Second), true)},
		{nil, claim("us", 1, t0, false)},
		{claim("eu", 1, t0, false), nil},
	}
	legit := claim("eu", 1, t0, false)
	fired := legit.Clone()
	fired.State, fired.Attempts[0].Fired = ledger.StateFiring, true
	pairs = append(pairs, [2]*ledger.Record{legit, fired})
	for i, p := range pairs {
		want := conflictaudit.Detect(p[0], p[1])
		got := conflictaudit.Detect(image(t, p[0]), image(t, p[1]))
		if (want == nil) != (got == nil) || want != nil && (got.Reason != want.Reason || got.Winner != want.Winner || got.Loser != want.Loser) {
			t.Fatalf("pair %d: on records %+v, on decoded images %+v", i, want, got)
		}
	}
}

// Two regions, one effect: region A's executor claims and fires it; its
// record replicates to region B, and then A's lease is renewed only in A
// (a partition) or B's clock runs ahead of A's. B's executor reclaims the
// record as stalled and fires it too; A's completes. Whichever region's
// write replication keeps, the other region's stream shows the overwrite,
// and it is a conflict: a completed record is never reclaimed, and a
// record whose lease was live at the reclaim was never stalled. Both
// orders are flagged, and so is a reclaim of a record whose renewed lease
// (in A) had not ended.
func TestReclaimAcrossRegionsIsAConflict(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	clockA, clockB := ledgertest.NewClock(t0), ledgertest.NewClock(t0)
	stA, lA := regionLedger(t, clockA)
	stB, lB := regionLedger(t, clockB)
	eff := business(t, "two-regions")
	key := "effect#" + eff.Identity.EffectID
	calls := 0
	var firingA, renewedA *ledger.Record
	if _, err := lA.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		calls++
		// A's claim replicates to B; then B no longer sees A's writes.
		rec, _ := stA.Get(ctx, key)
		firingA = rec.Clone()
		if ok, _, err := stB.Create(ctx, rec.Clone(), clockB.Now()); !ok || err != nil {
			t.Fatalf("replicate: %v %v", ok, err)
		}
		renewedA = rec.Clone()
		renewedA.LeaseUntil = t0.Add(90 * time.Second) // A's heartbeat, seen in A only
		// B, a minute later on its clock: A's lease looks expired there.
		clockB.Advance(time.Minute)
		if _, err := lB.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { calls++; return []byte("b"), nil }); err != nil {
			t.Fatalf("B: %v", err)
		}
		clockA.Advance(5 * time.Second)
		return []byte("a"), nil
	}); err != nil {
		t.Fatalf("A: %v", err)
	}
	if calls != 2 {
		t.Fatalf("%d provider calls; the scenario needs both regions to fire", calls)
	}
	finalA, _ := stA.Get(ctx, key)
	finalB, _ := stB.Get(ctx, key)
	for _, c := range []struct {
		name     string
		old, cur *ledger.Record
	}{
		{"B's write kept: A's completed record overwritten", finalA, finalB},
		{"A's write kept: B's record overwritten", finalB, finalA},
		{"B's reclaim over A's renewed lease", renewedA, finalB},
	} {
		if Detect := conflictaudit.Detect(c.old, c.cur); Detect == nil {
			t.Errorf("%s: not flagged (old %s attempt %d, new %s attempt %d)", c.name, c.old.State, c.old.Attempt, c.cur.State, c.cur.Attempt)
		}
	}
	// B's reclaim over the lease A's claim wrote (not renewed) is what
	// one region does after a stall: not a conflict on its own.
	if c := conflictaudit.Detect(firingA, finalB); c != nil {
		t.Errorf("a reclaim after the lease written was flagged: %+v", c)
	}
}

// TestReclaimOnAClockAheadBeyondTheLeaseIsNotAConflict states the limit of
// the audit (MULTI_REGION.md, reconciled-records): A's owner is alive and
// firing, its claim replicated to B; B's clock runs ahead of A's by more
// than the lease, so B reclaims at once and fires too, and B's reclaim
// replicates into A before A's outcome, which A's replica then refuses (the
// owner changed). A's stream shows A's firing attempt overwritten by B's
// reclaim, stamped after A's lease end on B's clock: exactly what one
// region writes when it reclaims from an executor that crashed. No image
// tells the two apart, so no conflict event; the reclaim and the escaped
// attempt are what the auditor counts (idemkit.audit.reclaims_total,
// idemkit.audit.escaped_total). A skew within the lease's slack is seen
// (TestReclaimAcrossRegionsIsAConflict: B's reclaim before A's renewed
// lease), as is A's outcome landing first.
func TestReclaimOnAClockAheadBeyondTheLeaseIsNotAConflict(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	clockA, clockB := ledgertest.NewClock(t0), ledgertest.NewClock(t0.Add(2*time.Minute)) // B ahead by four leases
	stA, lA := regionLedger(t, clockA)
	stB, lB := regionLedger(t, clockB)
	eff := business(t, "clock-ahead")
	key := "effect#" + eff.Identity.EffectID
	calls := 0
	var firingA *ledger.Record
	_, errA := lA.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		calls++
		rec, _ := stA.Get(ctx, key)
		firingA = rec.Clone()
		if ok, _, err := stB.Create(ctx, rec.Clone(), clockB.Now()); !ok || err != nil {
			t.Fatalf("replicate A's claim: %v %v", ok, err)
		}
		if _, err := lB.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { calls++; return []byte("b"), nil }); err != nil {
			t.Fatalf("B: %v", err)
		}
		// B's reclaim and outcome replicate into A (last writer wins).
		recB, _ := stB.Get(ctx, key)
		if ok, _, err := stA.Replace(ctx, recB.Clone(), ledger.Expect{Owner: firingA.Owner, Attempt: firingA.Attempt, State: firingA.State}, clockA.Now()); !ok || err != nil {
			t.Fatalf("replicate B's write: %v %v", ok, err)
		}
		clockA.Advance(5 * time.Second) // within A's lease on A's clock
		return []byte("a"), nil
	})
	if calls != 2 {
		t.Fatalf("%d provider calls; the scenario needs both regions to fire", calls)
	}
	finalA, _ := stA.Get(ctx, key)
	if errA == nil && finalA.Owner == firingA.Owner {
		t.Fatalf("A's outcome landed over B's reclaim: not the scenario")
	}
	if c := conflictaudit.Detect(firingA, finalA); c != nil {
		t.Fatalf("flagged %+v: the limit MULTI_REGION.md states no longer holds; update it and this test", c)
	}
	if finalA.Attempt != 2 || len(finalA.Attempts) < 1 || finalA.Attempts[0].State != ledger.AttemptEscaped {
		t.Fatalf("A's replica holds attempt %d, rows %+v; want B's reclaim with A's attempt escaped (what the auditor counts)", finalA.Attempt, finalA.Attempts)
	}
}

// crashingFencer is a fence.Owner whose Token panics while crash is set:
// an executor that dies between its claim and its fencing token.
type crashingFencer struct {
	*fence.Owner
	crash bool
}

func (c *crashingFencer) Token(ctx context.Context, effectID string) (uint64, error) {
	if c.crash {
		panic("executor died before its fencing token")
	}
	return c.Owner.Token(ctx, effectID)
}

// Under a Fencer a claim is not its fire mark: an executor that dies between
// the two leaves the record claimed, never fired, its lease running out. An
// operator's resolution of the escaped attempt before it (in the same region)
// closes that stalled claim as released, as a reclaim does: no attempt of the
// resolved effect stays claimed, and the stream auditor does not take the
// resolution for a reclaim made within the lease.
func TestResolveOverAStalledClaimIsNotAConflict(t *testing.T) {
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	owner, err := fence.New(fence.Config{Store: fencememstore.New(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	fencer := &crashingFencer{Owner: owner}
	st := &recording{Store: memstore.New()}
	l, err := ledger.New(ledger.Config{Store: st, Fencer: fencer, Lease: 30 * time.Second, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eff := business(t, "stalled")
	// Attempt 1 passes the fence and times out: escaped.
	_, err = l.Do(ctx, eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	}))
	if !errors.Is(err, ledger.ErrUncertain) {
		t.Fatal(err)
	}
	// Attempt 2 is claimed, and its executor dies before its token.
	fencer.crash = true
	func() {
		defer func() { _ = recover() }()
		_, _ = l.Do(ctx, eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) { return []byte("x"), nil }))
	}()
	fencer.crash = false
	clock.Advance(time.Minute)
	v, err := l.ShowEffect(ctx, eff.Identity.EffectID)
	if err != nil || v.State != ledger.EffectEscaped || v.Attempt != 2 {
		t.Fatalf("before: %+v %v", v, err)
	}
	v, err = l.Resolve(ctx, eff.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops", Rev: v.Rev})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range v.Attempts {
		if at.State == ledger.AttemptClaimed {
			t.Errorf("attempt %d of the resolved effect is still claimed: %+v", at.N, v.Attempts)
		}
	}
	a, _ := conflictaudit.New(conflictaudit.Config{Strategy: fence.FencedEffects})
	for i, c := range st.changes {
		if got := a.Observe(c[0], c[1]); got != nil {
			t.Errorf("change %d flagged: %+v", i, got)
		}
	}
}
