package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/ledger"
)

var storeTests = []test{
	{"CreateIsInsertIfAbsent", testCreateInsertIfAbsent},
	{"CreateRace32", testCreateRace},
	{"RecordRoundTrip", testRecordRoundTrip},
	{"CreateReplacesExpired", testCreateReplacesExpired},
	{"CreateRetentionBoundary", testCreateRetentionBoundary},
	{"ReplaceConditions", testReplaceConditions},
	{"FenceCondition", testFenceCondition},
	{"ListByRun", testListByRun},
	{"ListByRunReferences", testListByRunRefs},
	{"RecordsAreTheCallers", testRecordsAreTheCallers},
	{"GetOfAKeyNoRecordCanHave", testGetOddKeys},
}

// testGetOddKeys: Get of a key no record can have (empty, not UTF-8, or
// longer than DynamoDB keeps a key) finds nothing, as for any absent key,
// and so do the operator's calls that take an effect id as typed (Lookup,
// ShowEffect, Resolve): never a store error.
func testGetOddKeys(t *testing.T, e *env) {
	ctx := context.Background()
	long := "acme/" + strings.Repeat("a", 3000)
	for _, key := range []string{"", "\xff\xfe", "effect#" + long, "host#" + strings.Repeat("h", 3000)} {
		if rec, err := e.store.Get(ctx, key); err != nil || rec != nil {
			t.Errorf("Get(%.20q…, %d bytes) = %v, %v; want nil, nil", key, len(key), rec, err)
		}
	}
	l := e.ledger()
	for _, id := range []string{"", long} {
		if rec, err := l.Lookup(ctx, id); err != nil || rec != nil {
			t.Errorf("Lookup of a %d-byte id = %v, %v; want nil, nil", len(id), rec, err)
		}
		if _, err := l.ShowEffect(ctx, id); !errors.Is(err, ledger.ErrEffectNotFound) {
			t.Errorf("ShowEffect of a %d-byte id: %v, want ErrEffectNotFound", len(id), err)
		}
		if _, err := l.Resolve(ctx, id, ledger.Resolution{As: ledger.Delivered, Operator: "op", Rev: "r"}); !errors.Is(err, ledger.ErrEffectNotFound) {
			t.Errorf("Resolve of a %d-byte id: %v, want ErrEffectNotFound", len(id), err)
		}
	}
}

// sample returns a fully populated record (every field set) for key.
func (e *env) sample(key string, now time.Time) *ledger.Record {
	id := e.business("sample", key)
	run := e.runID()
	return &ledger.Record{
		Key: "effect#" + id.EffectID, Kind: identity.KindEffect, EffectID: id.EffectID, Tenant: id.Tenant,
		Keying: id.Keying, IdentityRecipe: id.Recipe, SemanticRecipe: "openwop-semantic-request-v2",
		RequestDigest: "0f3a", ProviderKey: id.ProviderKey, RunID: run,
		State: ledger.StateClaimed, Owner: "owner-1", Attempt: 1, LeaseUntil: now.Add(30 * time.Second),
		Attempts:  []ledger.Attempt{{N: 1, State: ledger.AttemptClaimed, At: now, RunID: run, NodeID: "n:1", InvocationID: "inv-1"}},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ledger.MinRetention),
	}
}

func testCreateInsertIfAbsent(t *testing.T, e *env) {
	ctx, now := e.ctx(), e.clock.Now()
	r := e.sample("a", now)
	won, cur, err := e.raw.Create(ctx, r, now)
	if err != nil || !won || cur != nil {
		t.Fatalf("first Create = %v, %v, %v; want won", won, cur, err)
	}
	r2 := r.Clone()
	r2.Owner = "owner-2"
	won, cur, err = e.raw.Create(ctx, r2, now)
	if err != nil || won {
		t.Fatalf("second Create = %v, %v; want lost", won, err)
	}
	if cur == nil || cur.Owner != "owner-1" {
		t.Fatalf("losing Create returned %+v; want the existing record (owner-1)", cur)
	}
	if got := e.get(r.Key); got.Owner != "owner-1" {
		t.Fatalf("record overwritten by the losing Create: owner %q", got.Owner)
	}
}

func testCreateRace(t *testing.T, e *env) {
	ctx, now := e.ctx(), e.clock.Now()
	base := e.sample("race", now)
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			r := base.Clone()
			r.Owner = "owner-" + string(rune('A'+i))
			won, _, err := e.raw.Create(ctx, r, now)
			if err != nil {
				t.Error(err)
			}
			if won {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d racing Creates won, want exactly 1", wins.Load())
	}
}

func testRecordRoundTrip(t *testing.T, e *env) {
	ctx, now := e.ctx(), e.clock.Now()
	r := e.sample("rt", now)
	r.State = ledger.StateCompleted
	r.Fence = 42
	r.Outcome = &ledger.Outcome{OK: false, Streamed: true, Error: "declined", Value: []byte{0, 1, 2, 255}, Dropped: true,
		BodyDigest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", BodySize: 1 << 40}
	r.Attempts = append(r.Attempts, ledger.Attempt{N: 2, State: ledger.AttemptEscaped, At: now.Add(time.Millisecond), Fired: true, NodeID: "n"})
	r.Attempts[0].State = ledger.AttemptReleased
	r.Attempt = 2
	if won, _, err := e.raw.Create(ctx, r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	got := e.get(r.Key)
	if !reflect.DeepEqual(got, r) {
		t.Fatalf("record did not round-trip:\n got %+v\nwant %+v", got, r)
	}
	if miss, err := e.raw.Get(ctx, "effect#"+e.tenant+"/nope-nope-nope-nope"); err != nil || miss != nil {
		t.Fatalf("Get of an absent key = %v, %v; want nil, nil", miss, err)
	}
}

// createPastRetention creates the sample record key with a retention of one
// second and returns it and a time two seconds on, when it is past retention.
func (e *env) createPastRetention(t *testing.T, key string) (*ledger.Record, time.Time) {
	t.Helper()
	now := e.clock.Now()
	r := e.sample(key, now)
	r.ExpiresAt = now.Add(time.Second)
	if won, _, err := e.raw.Create(e.ctx(), r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	return r, now.Add(2 * time.Second)
}

func testCreateReplacesExpired(t *testing.T, e *env) {
	ctx := e.ctx()
	r, later := e.createPastRetention(t, "exp")
	r2 := r.Clone()
	r2.Owner, r2.ExpiresAt = "owner-2", later.Add(ledger.MinRetention)
	won, _, err := e.raw.Create(ctx, r2, later)
	if err != nil || !won {
		t.Fatalf("Create over a record past retention = %v, %v; want won (expiry is inside the condition)", won, err)
	}
	if got := e.get(r.Key); got.Owner != "owner-2" {
		t.Fatalf("owner %q, want owner-2", got.Owner)
	}
}

// testCreateRetentionBoundary: a record is live until the instant its
// retention ends (DynamoDB's expiresAtMs <= now): a Create a millisecond
// before loses to it, a Create at that instant replaces it.
func testCreateRetentionBoundary(t *testing.T, e *env) {
	ctx := e.ctx()
	now := e.clock.Now().Truncate(time.Millisecond)
	r := e.sample("expedge", now)
	r.ExpiresAt = now.Add(time.Second)
	if won, _, err := e.raw.Create(ctx, r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	r2 := r.Clone()
	r2.Owner, r2.ExpiresAt = "owner-2", now.Add(ledger.MinRetention)
	before := r.ExpiresAt.Add(-time.Millisecond)
	if won, cur, err := e.raw.Create(ctx, r2, before); err != nil || won || cur == nil || cur.Owner != r.Owner {
		t.Fatalf("Create a millisecond before the record's retention ends = %v, %+v, %v; want lost to the live record", won, cur, err)
	}
	if won, _, err := e.raw.Create(ctx, r2, r.ExpiresAt); err != nil || !won {
		t.Fatalf("Create at the instant the record's retention ends = %v, %v; want won", won, err)
	}
	if got := e.get(r.Key); got.Owner != "owner-2" {
		t.Fatalf("owner %q, want owner-2", got.Owner)
	}
}

func testReplaceConditions(t *testing.T, e *env) {
	ctx, now := e.ctx(), e.clock.Now()
	r := e.sample("repl", now)
	if won, _, err := e.raw.Create(ctx, r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	next := r.Clone()
	next.State = ledger.StateFiring
	good := ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateClaimed}
	bad := []struct {
		name string
		want ledger.Expect
		now  time.Time
	}{
		{"wrong owner", ledger.Expect{Owner: "owner-x", Attempt: 1, State: ledger.StateClaimed}, now},
		{"wrong attempt", ledger.Expect{Owner: "owner-1", Attempt: 2, State: ledger.StateClaimed}, now},
		{"wrong state", ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateFiring}, now},
		{"lease still live", ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateClaimed, LeaseExpired: true}, now},
		{"past retention", good, r.ExpiresAt},
	}
	for _, b := range bad {
		ok, cur, err := e.raw.Replace(ctx, next, b.want, b.now)
		if err != nil || ok {
			t.Fatalf("%s: Replace = %v, %v; want refused", b.name, ok, err)
		}
		if cur == nil || cur.State != ledger.StateClaimed || cur.Owner != "owner-1" {
			t.Fatalf("%s: refused Replace returned %+v; want the stored record", b.name, cur)
		}
	}
	if ok, _, err := e.raw.Replace(ctx, next, good, now); err != nil || !ok {
		t.Fatalf("matching Replace = %v, %v; want ok", ok, err)
	}
	if got := e.get(r.Key); got.State != ledger.StateFiring {
		t.Fatalf("state %q after Replace, want firing", got.State)
	}
	// Reclaim of an expired lease.
	exp := now.Add(31 * time.Second)
	take := next.Clone()
	take.Owner, take.Attempt, take.State = "owner-2", 2, ledger.StateClaimed
	want := ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateFiring, LeaseExpired: true}
	if ok, _, err := e.raw.Replace(ctx, take, want, exp); err != nil || !ok {
		t.Fatalf("reclaim after lease expiry = %v, %v; want ok", ok, err)
	}
	// The stale owner can no longer write.
	if ok, cur, err := e.raw.Replace(ctx, next, ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateFiring}, exp); err != nil || ok || cur.Owner != "owner-2" {
		t.Fatalf("stale owner Replace = %v, %+v, %v; want refused with owner-2's record", ok, cur, err)
	}
	// Replace of an absent record.
	ghost := e.sample("ghost", now)
	if ok, cur, err := e.raw.Replace(ctx, ghost, good, now); err != nil || ok || cur != nil {
		t.Fatalf("Replace of absent = %v, %v, %v; want false, nil, nil", ok, cur, err)
	}
}

func testFenceCondition(t *testing.T, e *env) {
	ctx, now := e.ctx(), e.clock.Now()
	r := e.sample("fence", now)
	r.Fence = 10
	if won, _, err := e.raw.Create(ctx, r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	want := ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateClaimed}
	stale := r.Clone()
	stale.Fence = 9
	if ok, cur, err := e.raw.Replace(ctx, stale, want, now); err != nil || ok || cur == nil || cur.Fence != 10 {
		t.Fatalf("Replace with a lower fence = %v, %+v, %v; want refused", ok, cur, err)
	}
	same := r.Clone()
	same.Fence = 10
	if ok, _, err := e.raw.Replace(ctx, same, want, now); err != nil || !ok {
		t.Fatalf("Replace with an equal fence = %v, %v; want ok", ok, err)
	}
	up := r.Clone()
	up.Fence = 11
	if ok, _, err := e.raw.Replace(ctx, up, want, now); err != nil || !ok {
		t.Fatalf("Replace with a higher fence = %v, %v; want ok", ok, err)
	}
	if got := e.get(r.Key); got.Fence != 11 {
		t.Fatalf("fence %d, want 11", got.Fence)
	}
}

func testListByRun(t *testing.T, e *env) {
	ctx := context.Background()
	l := e.ledger()
	runA, runB := e.runID(), e.runID()
	for i, run := range []string{runA, runA, runB} {
		eff := ledger.Effect{Identity: e.activity(run, "n", uint64(i)), RunID: run, NodeID: "n"}
		if _, err := l.Do(ctx, eff, e.charge(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.FireOnce(ctx, identity.Slot{Job: "job", Slot: runA}, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() string {
		recs, err := e.raw.ListByRun(ctx, runA)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 {
			return fmt.Sprintf("ListByRun(runA) returned %d records, want 2", len(recs))
		}
		for _, r := range recs {
			if r.RunID != runA || r.Kind != identity.KindEffect {
				t.Fatalf("ListByRun(runA) returned %+v", r)
			}
		}
		return ""
	})
}

// testListByRunRefs: a run reference lists a record created before the
// reference's expiry (a later AddRunRef of the same run and key sets that
// expiry anew), and one holding an attempt of the run whatever its expiry;
// a record created at or after the expiry is a later effect, not listed.
func testListByRunRefs(t *testing.T, e *env) {
	ctx := e.ctx()
	now := e.clock.Now().Truncate(time.Millisecond)
	runB, runC, runD := e.runID(), e.runID(), e.runID()
	r := e.sample("refs", now)
	r.Attempts = append(r.Attempts, ledger.Attempt{N: 2, State: ledger.AttemptClaimed, At: now, RunID: runB, NodeID: "n:2", InvocationID: "inv-2"})
	r.Attempt = 2
	if won, _, err := e.raw.Create(ctx, r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	for _, ref := range []struct {
		run string
		exp time.Time
	}{{runB, now.Add(-time.Second)}, {runC, now.Add(-time.Second)}, {runC, now.Add(time.Hour)}, {runD, now}} {
		if err := e.raw.AddRunRef(ctx, r.Key, ref.run, ref.exp); err != nil {
			t.Fatal(err)
		}
	}
	listed := func(run string) int {
		recs, err := e.raw.ListByRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range recs {
			if got.Key != r.Key {
				t.Fatalf("ListByRun listed %s, want only %s", got.Key, r.Key)
			}
		}
		return len(recs)
	}
	eventually(t, func() string {
		if n := listed(runB); n != 1 {
			return fmt.Sprintf("the run holding an attempt, its reference expired before the record's creation: %d records listed, want 1", n)
		}
		if n := listed(runC); n != 1 {
			return fmt.Sprintf("a reference written again with a later expiry: %d records listed, want 1", n)
		}
		return ""
	})
	if n := listed(runD); n != 0 {
		t.Fatalf("a reference expiring at the record's creation listed %d records, want none", n)
	}
}

// testRecordsAreTheCallers: a record given to Create or Replace, or
// returned by Get or Scan, is the caller's: changing it changes nothing
// stored (as with any store behind a network); and Scan stops when its
// function returns false.
func testRecordsAreTheCallers(t *testing.T, e *env) {
	ctx := e.ctx()
	now := e.clock.Now().Truncate(time.Millisecond)
	r := e.sample("copies", now)
	if won, _, err := e.raw.Create(ctx, r, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	r.Owner, r.Attempts[0].NodeID = "changed", "changed"
	got := e.get(r.Key)
	if got.Owner != "owner-1" || got.Attempts[0].NodeID != "n:1" {
		t.Fatalf("a change to the record given to Create reached the store: %+v", got)
	}
	got.Owner, got.Attempts[0].NodeID = "changed", "changed"
	if again := e.get(r.Key); again.Owner != "owner-1" || again.Attempts[0].NodeID != "n:1" {
		t.Fatalf("a change to Get's answer reached the store: %+v", again)
	}
	next := e.get(r.Key)
	next.Owner, next.Attempt = "owner-2", 2
	if won, _, err := e.raw.Replace(ctx, next, ledger.Expect{Owner: "owner-1", Attempt: 1, State: ledger.StateClaimed}, now); err != nil || !won {
		t.Fatalf("Replace = %v, %v", won, err)
	}
	next.Owner = "changed"
	if again := e.get(r.Key); again.Owner != "owner-2" {
		t.Fatalf("a change to the record given to Replace reached the store: %+v", again)
	}
	sc, ok := e.raw.(ledger.Scanner)
	if !ok {
		return
	}
	r2 := e.sample("copies2", now)
	if won, _, err := e.raw.Create(ctx, r2, now); err != nil || !won {
		t.Fatalf("Create = %v, %v", won, err)
	}
	calls := 0
	if err := sc.Scan(ctx, func(*ledger.Record) bool { calls++; return false }); err != nil || calls != 1 {
		t.Fatalf("Scan whose function returned false called it %d times, %v; want once", calls, err)
	}
}

// eventually retries check (which returns "" when satisfied) for a few
// seconds: a store's run index may be eventually consistent.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	var msg string
	for range 50 {
		if msg = check(); msg == "" {
			return
		}
		_ = clock.Sleep(context.Background(), 100*time.Millisecond)
	}
	t.Fatal(msg)
}
