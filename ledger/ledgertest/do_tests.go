package ledgertest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/semantic"
)

var doTests = []test{
	{"FirstEffectRoundTrips", testFirstEffect},
	{"FusedClaimIsTheFireMark", testFusedClaim},
	{"FencedFirstEffectRoundTrips", testFirstEffectFenced},
	{"DuplicateReplaysInOneRoundTrip", testDuplicate},
	{"Race32ExecutorsOneEffect", testRace32},
	{"Race16FencedExecutorsOneEffect", testRace16Fenced},
	{"CrashAfterProviderCallReusesKey", testCrashAfterProviderCall},
	{"CrashAfterClaimEscapesAndReusesKey", testCrashAfterClaim},
	{"ReclaimRefusedByARenewalAfterItsRead", testReclaimAfterRenewal},
	{"CancelledAfterClaimIsReleased", testCancelledAfterClaim},
	{"FencedCrashBeforeFireMarkIsReleased", testCrashBeforeFire},
	{"StaleOwnerCannotRecord", testStaleOwner},
	{"StaleOwnerErrorIsOnlyLeaseLost", testStaleOwnerError},
	{"FailureMessageCutOnACharacter", testFailureMessageCut},
	{"FailureMessageNotUTF8IsMadeValid", testFailureMessageNotUTF8},
	{"BusinessIdentityAcrossRunsFiresOnce", testBusinessAcrossRuns},
	{"ActivityRecipeOrdinals", testActivityOrdinals},
	{"DigestMismatch", testMismatch},
	{"FailureRecordedAndReplayed", testFailureRecorded},
	{"NotSentReleases", testNotSent},
	{"UncertainEscapesAndReusesKey", testUncertain},
	{"LiveClaimInFlight", testInFlight},
	{"BoundedWaitGetsOutcome", testBoundedWait},
	{"Retention", testRetention},
	{"StreamedBodyNotCached", testStreamed},
	{"DoStreamRecordsMetadataOnly", testDoStream},
	{"StaleFenceRejected", testStaleFence},
	{"FencerErrorReleases", testFencerError},
	{"WitnessProjection", testWitness},
	{"EscapedRowShowsFireTime", testEscapedShowsFireTime},
}

func mustDo(t *testing.T, l *ledger.Ledger, eff ledger.Effect, fn ledger.Func) ledger.Result {
	t.Helper()
	r, err := l.Do(context.Background(), eff, fn)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	return r
}

func testFirstEffect(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	var calls atomic.Int64
	e.resetRT()
	r := mustDo(t, l, eff, e.charge(&calls))
	// Without a Fencer: the claim (written firing: the point of no return)
	// and the outcome.
	e.checkRT("first effect", 2, 2)
	if r.Replayed || calls.Load() != 1 || e.prov.Effects() != 1 {
		t.Fatalf("first Do: replayed=%v calls=%d effects=%d", r.Replayed, calls.Load(), e.prov.Effects())
	}
	if !strings.HasPrefix(string(r.Value), "effect-1:") || r.Attempt != 1 {
		t.Fatalf("result %+v", r)
	}
	rec := e.get(effectKey(eff.Identity))
	if rec.State != ledger.StateCompleted || rec.Outcome == nil || !rec.Outcome.OK || !bytes.Equal(rec.Outcome.Value, r.Value) {
		t.Fatalf("record %+v", rec)
	}
	if rec.IdentityRecipe != identity.BusinessRecipe || rec.Keying != identity.KeyingBusinessIdentity {
		t.Fatalf("recipe stamps %q %q", rec.IdentityRecipe, rec.Keying)
	}
	if got := e.prov.Keys(); len(got) != 1 || got[0] != rec.ProviderKey || got[0] != eff.Identity.ProviderKey {
		t.Fatalf("provider received %v; ledger providerKey %q", got, rec.ProviderKey)
	}
}

// testFusedClaim: without a Fencer nothing happens between the claim and the
// call, so the claim is the point of no return: the effect function runs
// after one store call, on a record the claim wrote in state firing with
// its attempt fired at the claim's time, leased and retained as a fire mark
// would leave it. A reclaim (here of a released record) is written firing
// the same way.
func testFusedClaim(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	key := effectKey(eff.Identity)
	now := e.clock.Now().UTC().Truncate(time.Millisecond)
	var seen *ledger.Record
	var before int64
	peek := func(body ledger.Func) ledger.Func {
		return func(ctx context.Context, c ledger.Call) ([]byte, error) {
			seen, before = e.get(key), e.store.calls.Load()
			return body(ctx, c)
		}
	}
	e.resetRT()
	if _, err := l.Do(context.Background(), eff, peek(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	})); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatalf("Do: %v", err)
	}
	if before != 1 {
		t.Fatalf("the effect function ran after %d store calls, want 1 (the claim)", before)
	}
	a := seen.Attempts[0]
	if seen.State != ledger.StateFiring || seen.Attempt != 1 || len(seen.Attempts) != 1 || seen.Fence != 0 ||
		!a.Fired || !a.FiredAt.Equal(now) || !a.At.Equal(now) || a.State != ledger.AttemptClaimed {
		t.Fatalf("claim %+v attempt %+v; want firing, attempt 1 claimed and fired at %s", seen, a, now)
	}
	if !seen.LeaseUntil.Equal(now.Add(30*time.Second)) || seen.ExpiresAt.Before(now.Add(ledger.MinRetention)) {
		t.Fatalf("claim lease %s retention %s", seen.LeaseUntil, seen.ExpiresAt)
	}
	// (+1 backend round trip: the test's own read inside fn)
	e.checkRT("first effect, not sent", 2, 2+1)

	// The reclaim of the released record: failed claim, reclaim, outcome.
	e.clock.Advance(time.Second)
	now = e.clock.Now().UTC().Truncate(time.Millisecond)
	e.resetRT()
	r := mustDo(t, l, eff, peek(e.charge(nil)))
	e.checkRT("reclaim of a released record", 3, 2+e.h.DuplicateRoundTrips+1)
	if before != 2 || r.Attempt != 2 {
		t.Fatalf("reclaim: fn after %d store calls (want 2), %+v", before, r)
	}
	a = seen.Attempts[1]
	if seen.State != ledger.StateFiring || seen.Attempt != 2 || !a.Fired || !a.FiredAt.Equal(now) ||
		a.State != ledger.AttemptClaimed || seen.Attempts[0].State != ledger.AttemptReleased ||
		!seen.LeaseUntil.Equal(now.Add(30*time.Second)) || seen.ExpiresAt.Before(now.Add(ledger.MinRetention)) {
		t.Fatalf("reclaim %+v attempts %+v; want firing, attempt 2 fired at %s", seen, seen.Attempts, now)
	}
	if e.prov.Effects() != 1 {
		t.Fatalf("provider effects %d", e.prov.Effects())
	}
}

// counterFencer issues fencing tokens 1, 2, 3, … (a linearizable owner
// inside one process).
type counterFencer struct{ n atomic.Uint64 }

func (f *counterFencer) Token(context.Context, string) (uint64, error) { return f.n.Add(1), nil }

func withFencer(f ledger.Fencer) func(*ledger.Config) {
	return func(c *ledger.Config) { c.Fencer = f }
}

// testFirstEffectFenced: with a Fencer the token must be checked at a fire
// mark made after it was taken, so the first effect keeps three writes: a
// claim in state claimed (nothing fired), the fire mark carrying the token,
// the outcome.
func testFirstEffectFenced(t *testing.T, e *env) {
	l := e.ledger(withFencer(&counterFencer{}))
	eff := e.effect()
	key := effectKey(eff.Identity)
	var claim *ledger.Record
	e.store.onCreate(func(r *ledger.Record, won bool, _ error) error {
		if won {
			claim = r.Clone()
		}
		return nil
	})
	var seen *ledger.Record
	var before int64
	e.resetRT()
	r := mustDo(t, l, eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		seen, before = e.get(key), e.store.calls.Load()
		if c.Fence != 1 {
			t.Errorf("call fence %d, want 1", c.Fence)
		}
		return e.prov.Call(ctx, c.ProviderKey, "charge")
	})
	e.checkRT("fenced first effect", 3, 3+1) // +1: the read inside fn
	if claim == nil || claim.State != ledger.StateClaimed || claim.Attempts[0].Fired || claim.Fence != 0 {
		t.Fatalf("fenced claim %+v; want claimed, not fired, no fence", claim)
	}
	if before != 2 || seen.State != ledger.StateFiring || seen.Fence != 1 || !seen.Attempts[0].Fired {
		t.Fatalf("fn after %d store calls on %+v; want 2 (claim, fire mark), firing with fence 1", before, seen)
	}
	if r.Replayed || e.prov.Effects() != 1 {
		t.Fatalf("%+v effects %d", r, e.prov.Effects())
	}
}

func testDuplicate(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	first := mustDo(t, l, eff, e.charge(nil))
	var calls atomic.Int64
	e.resetRT()
	// A duplicate from another executor (another Ledger) and another run.
	dup := eff
	dup.RunID, dup.NodeID = e.runID(), "other-entry"
	r := mustDo(t, e.ledger(), dup, e.charge(&calls))
	e.checkRT("duplicate", 1, e.h.DuplicateRoundTrips)
	if e.h.RoundTrips != nil && e.h.RoundTrips() != e.h.DuplicateRoundTrips {
		t.Errorf("duplicate: %d backend round trips, want %d", e.h.RoundTrips(), e.h.DuplicateRoundTrips)
	}
	if !r.Replayed || calls.Load() != 0 || !bytes.Equal(r.Value, first.Value) {
		t.Fatalf("duplicate: %+v calls=%d; want the recorded outcome and no fire", r, calls.Load())
	}
	if e.prov.Requests() != 1 {
		t.Fatalf("provider got %d requests, want 1", e.prov.Requests())
	}
	if !strings.Contains(e.metrics.String(), ledger.MetricSuppressions) {
		t.Fatalf("no %s metric in %s", ledger.MetricSuppressions, e.metrics.String())
	}
}

// raceDo starts n executors at once, each its own Ledger waiting up to a
// minute for an owner in flight, executor i doing effect(i) with fn; it
// asserts that every one succeeded with executor 0's value and returns how
// many fired rather than replayed.
func (e *env) raceDo(t *testing.T, n int, effect func(i int) ledger.Effect, fn ledger.Func, mod ...func(*ledger.Config)) (fired int) {
	t.Helper()
	var wg sync.WaitGroup
	res := make([]ledger.Result, n)
	errs := make([]error, n)
	start := make(chan struct{})
	mod = append([]func(*ledger.Config){func(c *ledger.Config) { c.Wait, c.PollInterval = 60*time.Second, 5*time.Millisecond }}, mod...)
	for i := range n {
		l := e.ledger(mod...)
		eff := effect(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = l.Do(context.Background(), eff, fn)
		}()
	}
	close(start)
	wg.Wait()
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("executor %d: %v", i, errs[i])
		}
		if !res[i].Replayed {
			fired++
		}
		if !bytes.Equal(res[i].Value, res[0].Value) {
			t.Fatalf("executor %d got %q, executor 0 got %q", i, res[i].Value, res[0].Value)
		}
	}
	return fired
}

func testRace32(t *testing.T, e *env) {
	eff := e.effect()
	var calls atomic.Int64
	fired := e.raceDo(t, 32, func(int) ledger.Effect {
		// Each executor has its own run.
		my := eff
		my.RunID = e.runID()
		return my
	}, e.charge(&calls))
	if fired != 1 || calls.Load() != 1 || e.prov.Effects() != 1 || e.prov.Requests() != 1 {
		t.Fatalf("fired=%d fn calls=%d provider effects=%d requests=%d; want all 1", fired, calls.Load(), e.prov.Effects(), e.prov.Requests())
	}
}

// testRace16Fenced: the three-write path under a Fencer (claim, fire mark
// with a token, outcome) is as exclusive as the fused claim: 16 executors
// sharing one fence owner, one fire.
func testRace16Fenced(t *testing.T, e *env) {
	eff := e.effect()
	var calls atomic.Int64
	fired := e.raceDo(t, 16, func(int) ledger.Effect {
		my := eff
		my.RunID = e.runID()
		return my
	}, e.charge(&calls), withFencer(&counterFencer{}))
	if fired != 1 || calls.Load() != 1 || e.prov.Effects() != 1 || e.prov.Requests() != 1 {
		t.Fatalf("fired=%d fn calls=%d provider effects=%d requests=%d; want all 1", fired, calls.Load(), e.prov.Effects(), e.prov.Requests())
	}
}

func testCrashAfterProviderCall(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	key := effectKey(eff.Identity)
	// The executor dies after the provider call, before the outcome is
	// recorded: the outcome write never happens.
	e.store.failOnce(ledger.StateCompleted, errCrash)
	if _, err := l.Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, errCrash) || !errors.Is(err, ledger.ErrOutcomeNotRecorded) ||
		errors.Is(err, ledger.ErrLeaseLost) || errors.Is(err, ledger.ErrEffectFailed) {
		t.Fatalf("crashed Do: %v; want the store's error, matching ErrOutcomeNotRecorded only", err)
	}
	if rec := e.get(key); rec.State != ledger.StateFiring {
		t.Fatalf("state after crash %q, want firing", rec.State)
	}
	// While the lease is live the effect is in flight.
	var ife *ledger.InFlightError
	if _, err := l.Do(context.Background(), eff, e.charge(nil)); !errors.As(err, &ife) || !errors.Is(err, ledger.ErrInFlight) || ife.RetryAfter <= 0 {
		t.Fatalf("Do during the lease: %v; want *InFlightError", err)
	}
	e.clock.Advance(31 * time.Second)
	r := mustDo(t, e.ledger(), eff, e.charge(nil))
	if r.Replayed || r.Attempt != 2 {
		t.Fatalf("retry %+v; want attempt 2 fired", r)
	}
	if e.prov.Effects() != 1 || e.prov.Requests() != 2 {
		t.Fatalf("provider effects=%d requests=%d; want 1 effect (deduplicated retry)", e.prov.Effects(), e.prov.Requests())
	}
	keys := e.prov.Keys()
	if keys[0] != keys[1] || keys[0] != eff.Identity.ProviderKey {
		t.Fatalf("retry used another provider key: %v", keys)
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v; want [escaped completed]", got)
	}
	m := e.metrics.String()
	if !strings.Contains(m, ledger.MetricReclaims) || !strings.Contains(m, ledger.MetricEscaped) {
		t.Fatalf("missing reclaim/escaped metrics: %s", m)
	}
}

// testCrashAfterClaim: without a Fencer the claim is the point of no
// return. An executor that dies right after its claim reached the store
// never called the provider, but no other executor can know that: the
// attempt is in flight while its lease runs, then reclaimed as escaped (it
// may have fired), and the next attempt sends the same provider key, so the
// effect is performed once.
func testCrashAfterClaim(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	key := effectKey(eff.Identity)
	e.store.failAfterClaim(errCrash)
	var calls atomic.Int64
	if _, err := l.Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, errCrash) || calls.Load() != 0 {
		t.Fatalf("Do that dies after its claim: %v, calls %d; want the error and no fire", err, calls.Load())
	}
	if rec := e.get(key); rec.State != ledger.StateFiring || !rec.Attempts[0].Fired {
		t.Fatalf("record after the crash %+v; want firing, attempt fired", rec)
	}
	if _, err := e.ledger().Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, ledger.ErrInFlight) || calls.Load() != 0 {
		t.Fatalf("Do during the lease: %v calls %d; want ErrInFlight", err, calls.Load())
	}
	e.clock.Advance(31 * time.Second)
	r := mustDo(t, e.ledger(), eff, e.charge(&calls))
	if r.Replayed || r.Attempt != 2 || calls.Load() != 1 || e.prov.Effects() != 1 || e.prov.Requests() != 1 {
		t.Fatalf("reclaim %+v calls=%d effects=%d requests=%d; want attempt 2 fired once", r, calls.Load(), e.prov.Effects(), e.prov.Requests())
	}
	if k := e.prov.Keys(); k[0] != eff.Identity.ProviderKey || r.ProviderKey != eff.Identity.ProviderKey {
		t.Fatalf("provider key %v, result %q; want %q", k, r.ProviderKey, eff.Identity.ProviderKey)
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v; want [escaped completed] (the claim was the point of no return)", got)
	}
	m := e.metrics.String()
	if !strings.Contains(m, ledger.MetricReclaims) || !strings.Contains(m, ledger.MetricEscaped) {
		t.Fatalf("missing reclaim/escaped metrics: %s", m)
	}
	if d := mustDo(t, e.ledger(), eff, e.charge(&calls)); !d.Replayed || calls.Load() != 1 {
		t.Fatalf("duplicate %+v calls %d", d, calls.Load())
	}
}

// renewedBeforeReclaim lands the owner's lease renewal (its heartbeat's
// write: the same owner, attempt and state, a later lease) on the store
// just before a reclaim's write reaches it, once.
type renewedBeforeReclaim struct {
	ledger.Store
	lease time.Duration
	once  sync.Once
}

func (s *renewedBeforeReclaim) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if next.Attempt == want.Attempt+1 {
		s.once.Do(func() {
			cur, err := s.Store.Get(ctx, next.Key)
			if err != nil || cur == nil {
				return
			}
			renewed := cur.Clone()
			renewed.LeaseUntil = now.Add(s.lease)
			_, _, _ = s.Store.Replace(ctx, renewed, ledger.Expect{Owner: cur.Owner, Attempt: cur.Attempt, State: cur.State}, now)
		})
	}
	return s.Store.Replace(ctx, next, want, now)
}

// testReclaimAfterRenewal: an executor reads a firing attempt whose lease
// has run out and reclaims it, and the owner's renewal lands between the
// read and the reclaim's write. The reclaim is refused (its write asks
// the store for a lease still expired, not only for the owner, attempt
// and state it read): the effect is not fired again while its owner is
// still calling the provider, the retry is told it is in flight, and the
// owner's outcome is recorded. (A reclaim that did not ask for the lease
// expired passed every other test; RED_TEAM 581.)
func testReclaimAfterRenewal(t *testing.T, e *env) {
	const lease = 30 * time.Second
	eff := e.effect()
	var calls atomic.Int64
	var second error
	res, err := e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 }).Do(context.Background(), eff,
		func(ctx context.Context, c ledger.Call) ([]byte, error) {
			calls.Add(1)
			// The owner is still calling the provider when its lease
			// runs out on the clock; another executor retries.
			e.clock.Advance(lease + time.Second)
			_, second = e.ledger(func(c *ledger.Config) {
				c.Heartbeat = -1
				c.Store = &renewedBeforeReclaim{Store: e.raw, lease: lease}
			}).Do(context.Background(), eff, e.charge(&calls))
			return []byte(`{"charge":"ch_1"}`), nil
		})
	if calls.Load() != 1 {
		t.Fatalf("the provider was called %d times; the reclaim over the renewed lease: %v; the owner: %v", calls.Load(), second, err)
	}
	if !errors.Is(second, ledger.ErrInFlight) {
		t.Fatalf("the reclaim over the renewed lease: %v, want ErrInFlight", second)
	}
	if err != nil || string(res.Value) != `{"charge":"ch_1"}` {
		t.Fatalf("the owner's outcome: %+v %v, want its value recorded", res, err)
	}
	if d := mustDo(t, e.ledger(), eff, e.charge(&calls)); !d.Replayed || string(d.Value) != `{"charge":"ch_1"}` || calls.Load() != 1 {
		t.Fatalf("duplicate %+v calls %d, want the owner's outcome replayed", d, calls.Load())
	}
}

// testCancelledAfterClaim: an executor whose context ends right after its
// claim knows it did not call the effect function, with or without a
// Fencer: it gives the claim back (attempt released, no fire time; 2 store
// calls: claim, release) and the next Do fires at once.
func testCancelledAfterClaim(t *testing.T, e *env) {
	for _, fenced := range []bool{false, true} {
		var mod []func(*ledger.Config)
		if fenced {
			mod = append(mod, withFencer(&counterFencer{}))
		}
		l := e.ledger(mod...)
		eff := e.effect()
		key := effectKey(eff.Identity)
		ctx, cancel := context.WithCancel(context.Background())
		e.store.onCreate(func(_ *ledger.Record, won bool, _ error) error {
			if won {
				cancel()
			}
			return nil
		})
		var calls atomic.Int64
		effects := e.prov.Effects()
		e.resetRT()
		_, err := l.Do(ctx, eff, e.charge(&calls))
		e.store.onCreate(nil)
		cancel()
		if !errors.Is(err, context.Canceled) || calls.Load() != 0 {
			t.Fatalf("fenced=%t: Do cancelled after its claim: %v calls %d; want context.Canceled and no fire", fenced, err, calls.Load())
		}
		e.checkRT(fmt.Sprintf("fenced=%t: claim, then release", fenced), 2, 2)
		rec := e.get(key)
		if a := rec.Attempts[0]; rec.State != ledger.StateReleased || len(rec.Attempts) != 1 || a.State != ledger.AttemptReleased || a.Fired || !a.FiredAt.IsZero() {
			t.Fatalf("fenced=%t: record %+v attempts %+v; want released, attempt released without a fire time", fenced, rec, rec.Attempts)
		}
		r := mustDo(t, l, eff, e.charge(&calls)) // no clock advance: released is claimable at once
		if r.Attempt != 2 || r.Replayed || calls.Load() != 1 || e.prov.Effects() != effects+1 {
			t.Fatalf("fenced=%t: next Do %+v calls %d", fenced, r, calls.Load())
		}
		if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}) {
			t.Fatalf("fenced=%t: attempts %v; want [released completed]", fenced, got)
		}
	}
}

// testCrashBeforeFire: with a Fencer the claim is not the point of no
// return; an executor whose fire-mark write fails never fired, gives the
// attempt back unfired (released), and the next Do fires at once, with no
// lease to wait out. (An executor that dies before its fire mark, and so
// gives nothing back, is the crash matrix's: its attempt is reclaimed as
// released after the lease.)
func testCrashBeforeFire(t *testing.T, e *env) {
	l := e.ledger(withFencer(&counterFencer{}))
	eff := e.effect()
	key := effectKey(eff.Identity)
	e.store.failOnce(ledger.StateFiring, errCrash)
	var calls atomic.Int64
	if _, err := l.Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, errCrash) || calls.Load() != 0 {
		t.Fatalf("Do with a failed fire mark: %v, calls %d; want the error and no fire", err, calls.Load())
	}
	if rec := e.get(key); rec.State != ledger.StateReleased || rec.Attempts[0].Fired {
		t.Fatalf("record %+v; want released, not fired", rec)
	}
	r := mustDo(t, l, eff, e.charge(&calls))
	if r.Attempt != 2 || calls.Load() != 1 || e.prov.Effects() != 1 {
		t.Fatalf("retry %+v calls=%d", r, calls.Load())
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v; want [released completed] (never fired, so not escaped)", got)
	}
}

func testStaleOwner(t *testing.T, e *env) {
	eff := e.effect()
	key := effectKey(eff.Identity)
	a, b := e.ledger(), e.ledger()
	var bRes ledger.Result
	_, err := a.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
			return nil, err
		}
		// A stalls past its lease; B reclaims and completes meanwhile.
		e.clock.Advance(31 * time.Second)
		var err error
		if bRes, err = b.Do(ctx, eff, e.charge(nil)); err != nil {
			return nil, fmt.Errorf("executor B: %w", err)
		}
		return []byte("stale value from A"), nil
	})
	if !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("stale executor A: %v; want ErrLeaseLost", err)
	}
	rec := e.get(key)
	if rec.Attempt != 2 || rec.Outcome == nil || !bytes.Equal(rec.Outcome.Value, bRes.Value) || bytes.Contains(rec.Outcome.Value, []byte("stale")) {
		t.Fatalf("record %+v outcome %+v; want B's outcome untouched", rec, rec.Outcome)
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v; want [escaped completed]", got)
	}
	if e.prov.Effects() != 1 {
		t.Fatalf("provider effects %d, want 1", e.prov.Effects())
	}
}

// testStaleOwnerError: a stale executor whose effect function ends with
// an error (its context cancelled once its claim was reclaimed, a failure
// it reads as final, an uncertain outcome under a retry schedule) gets
// ErrLeaseLost alone: its verdict was not recorded (the record holds the
// new owner's success), so its error must not read as the effect's failure
// (ErrEffectFailed, *FailedError) or as a scheduled retry
// (ErrRetryLater), which a caller would report or act on.
func testStaleOwnerError(t *testing.T, e *env) {
	for _, c := range []struct {
		name  string
		retry *ledger.Retry
		err   func(ctx context.Context) error
	}{
		{"its context's error", nil, func(context.Context) error { return context.Canceled }},
		{"a failure", nil, func(context.Context) error { return errors.New("card declined") }},
		{"uncertain, with a retry schedule", &ledger.Retry{MaxAttempts: 5}, func(context.Context) error { return ledger.Uncertain(errors.New("timeout")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			eff := e.effect()
			eff.Retry = c.retry
			key := effectKey(eff.Identity)
			a, b := e.ledger(), e.ledger()
			var bRes ledger.Result
			_, err := a.Do(context.Background(), eff, func(ctx context.Context, call ledger.Call) ([]byte, error) {
				if _, err := e.prov.Call(ctx, call.ProviderKey, "charge"); err != nil {
					return nil, err
				}
				// A stalls past its lease; B reclaims and completes.
				e.clock.Advance(31 * time.Second)
				var err error
				if bRes, err = b.Do(context.WithoutCancel(ctx), eff, e.charge(nil)); err != nil {
					return nil, fmt.Errorf("executor B: %w", err)
				}
				return nil, c.err(ctx)
			})
			var failed *ledger.FailedError
			switch {
			case !errors.Is(err, ledger.ErrLeaseLost):
				t.Fatalf("stale executor A: %v; want ErrLeaseLost", err)
			case errors.Is(err, ledger.ErrEffectFailed), errors.As(err, &failed):
				t.Fatalf("stale executor A: %v reads as the effect's failure; B recorded its success", err)
			case errors.Is(err, ledger.ErrRetryLater), errors.Is(err, ledger.ErrUncertain), errors.Is(err, ledger.ErrAttemptsExhausted):
				t.Fatalf("stale executor A: %v reads as a verdict it never recorded", err)
			}
			rec := e.get(key)
			if rec.Outcome == nil || !rec.Outcome.OK || !bytes.Equal(rec.Outcome.Value, bRes.Value) {
				t.Fatalf("record %+v outcome %+v; want B's success untouched", rec, rec.Outcome)
			}
		})
	}
}

// testFailureMessageCut: a failure's message is kept to its first 1,024
// bytes, cut before a character that would not fit whole: the record and
// every duplicate's *FailedError carry valid UTF-8, and nothing fires
// again.
func testFailureMessageCut(t *testing.T, e *env) {
	eff := e.effect()
	var calls atomic.Int64
	// "é" is two bytes: the 1,024-byte cut falls inside the 512th.
	long := "x" + strings.Repeat("é", 1200)
	fail := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		calls.Add(1)
		return nil, errors.New(long)
	}
	for i := range 2 {
		_, err := e.ledger().Do(context.Background(), eff, fail)
		var failed *ledger.FailedError
		if !errors.As(err, &failed) {
			t.Fatalf("Do %d: %v, want *FailedError", i, err)
		}
		if !utf8.ValidString(failed.Message) || len(failed.Message) > 1024 || len(failed.Message) < 1020 || !strings.HasPrefix(long, failed.Message) {
			t.Fatalf("Do %d: message of %d bytes, valid UTF-8 %v, a prefix of the error %v", i, len(failed.Message), utf8.ValidString(failed.Message), strings.HasPrefix(long, failed.Message))
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d calls, want 1 (the failure recorded)", calls.Load())
	}
	if rec := e.get(effectKey(eff.Identity)); rec.Outcome == nil || rec.Outcome.OK || !utf8.ValidString(rec.Outcome.Error) {
		t.Fatalf("record outcome %+v, want the failure, valid UTF-8", rec.Outcome)
	}
}

// testFailureMessageNotUTF8: a failure whose message is not UTF-8 (a
// provider's raw bytes quoted in the error) is recorded, and answered to
// the call that ran it and to every duplicate, with each invalid byte as
// U+FFFD, as encoding/json writes it: Outcome.Error is always valid
// UTF-8, the same text in the witness as in *FailedError. A message
// whose replacement characters take it past 1,024 bytes is cut as any
// other.
func testFailureMessageNotUTF8(t *testing.T, e *env) {
	for _, tc := range []struct{ msg, want string }{
		{"provider said \xff\xfe: refused", "provider said \uFFFD\uFFFD: refused"},
		{"\xe9t\xe9", "\uFFFDt\uFFFD"},
		{"cut \xe2\x82", "cut \uFFFD\uFFFD"}, // a truncated 3-byte character
		{strings.Repeat("\xff", 400), strings.Repeat("\uFFFD", 341)},
	} {
		eff := e.effect()
		var calls atomic.Int64
		fail := func(ctx context.Context, c ledger.Call) ([]byte, error) {
			calls.Add(1)
			return nil, errors.New(tc.msg)
		}
		for i := range 2 {
			_, err := e.ledger().Do(context.Background(), eff, fail)
			var failed *ledger.FailedError
			if !errors.As(err, &failed) {
				t.Fatalf("%q: Do %d: %v, want *FailedError", tc.msg, i, err)
			}
			if failed.Message != tc.want {
				t.Fatalf("%q: Do %d: message %q, want %q", tc.msg, i, failed.Message, tc.want)
			}
		}
		if calls.Load() != 1 {
			t.Fatalf("%q: %d calls, want 1 (the failure recorded)", tc.msg, calls.Load())
		}
		if rec := e.get(effectKey(eff.Identity)); rec.Outcome == nil || rec.Outcome.Error != tc.want {
			t.Fatalf("%q: record outcome %+v, want the failure %q", tc.msg, rec.Outcome, tc.want)
		}
	}
}

func testBusinessAcrossRuns(t *testing.T, e *env) {
	id := e.business("refund", "order-123/refund-1")
	run1, run2 := e.runID(), e.runID()
	var calls atomic.Int64
	r1 := mustDo(t, e.ledger(), ledger.Effect{Identity: id, RunID: run1, NodeID: "refund"}, e.charge(&calls))
	r2 := mustDo(t, e.ledger(), ledger.Effect{Identity: id, RunID: run2, NodeID: "compensate"}, e.charge(&calls))
	r3 := mustDo(t, e.ledger(), ledger.Effect{Identity: id}, e.charge(&calls)) // an API entry point, no run
	if calls.Load() != 1 || e.prov.Effects() != 1 || r1.Replayed || !r2.Replayed || !r3.Replayed {
		t.Fatalf("calls=%d effects=%d replayed=%v,%v,%v", calls.Load(), e.prov.Effects(), r1.Replayed, r2.Replayed, r3.Replayed)
	}
	if r1.EffectID != r2.EffectID || r1.ProviderKey != r3.ProviderKey {
		t.Fatal("the same business identity resolved to different effects")
	}
}

func testActivityOrdinals(t *testing.T, e *env) {
	l := e.ledger()
	run := e.runID()
	var calls atomic.Int64
	eff := func(ord uint64) ledger.Effect {
		return ledger.Effect{Identity: e.activity(run, "llm", ord), RunID: run, NodeID: "llm"}
	}
	r0 := mustDo(t, l, eff(0), e.charge(&calls))
	r1 := mustDo(t, l, eff(1), e.charge(&calls))
	again := mustDo(t, l, eff(0), e.charge(&calls)) // a retry of ordinal 0
	if calls.Load() != 2 || e.prov.Effects() != 2 || r0.EffectID == r1.EffectID || !again.Replayed || !bytes.Equal(again.Value, r0.Value) {
		t.Fatalf("calls=%d effects=%d ids %s %s replay=%v", calls.Load(), e.prov.Effects(), r0.EffectID, r1.EffectID, again.Replayed)
	}
	rec := e.get(effectKey(eff(0).Identity))
	if rec.IdentityRecipe != identity.ActivityRecipe || rec.Keying != identity.KeyingActivityRecipe ||
		rec.Attempts[0].InvocationID != eff(0).Identity.InvocationID {
		t.Fatalf("stamps %q %q inv %q", rec.IdentityRecipe, rec.Keying, rec.Attempts[0].InvocationID)
	}
}

func testMismatch(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	eff.RequestDigest, eff.SemanticRecipe = "digest-A", "openwop-semantic-request-v2"
	mustDo(t, l, eff, e.charge(nil))
	var calls atomic.Int64
	for _, mod := range []func(*ledger.Effect){
		func(x *ledger.Effect) { x.RequestDigest = "digest-B" },
		func(x *ledger.Effect) { x.SemanticRecipe = "openwop-semantic-request-v3" },
		func(x *ledger.Effect) { x.RequestDigest, x.SemanticRecipe = "", "" },
	} {
		other := eff
		mod(&other)
		r, err := l.Do(context.Background(), other, e.charge(&calls))
		var me *ledger.MismatchError
		if !errors.As(err, &me) || !errors.Is(err, ledger.ErrMismatch) {
			t.Fatalf("Do with another request: %v; want *MismatchError", err)
		}
		if r.Value != nil || r.Replayed {
			t.Fatalf("mismatch returned the recorded outcome: %+v", r)
		}
	}
	if calls.Load() != 0 || e.prov.Effects() != 1 {
		t.Fatalf("mismatching requests fired: calls=%d", calls.Load())
	}
}

func testFailureRecorded(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	var calls atomic.Int64
	declined := errors.New("card declined")
	fail := func(ctx context.Context, c ledger.Call) ([]byte, error) { calls.Add(1); return nil, declined }
	_, err := l.Do(context.Background(), eff, fail)
	var fe *ledger.FailedError
	if !errors.As(err, &fe) || fe.Replayed || !errors.Is(err, declined) || !errors.Is(err, ledger.ErrEffectFailed) {
		t.Fatalf("first Do: %v; want *FailedError wrapping the cause", err)
	}
	_, err = e.ledger().Do(context.Background(), eff, fail)
	if !errors.As(err, &fe) || !fe.Replayed || fe.Message != "card declined" {
		t.Fatalf("duplicate: %v; want the recorded failure", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("failure re-fired: %d calls", calls.Load())
	}
}

func testNotSent(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	refused := errors.New("connection refused")
	_, err := l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) { return nil, ledger.NotSent(refused) })
	if !errors.Is(err, ledger.ErrNotSent) || !errors.Is(err, refused) {
		t.Fatalf("Do: %v", err)
	}
	r := mustDo(t, l, eff, e.charge(nil)) // no clock advance: released records are claimable at once
	if r.Attempt != 2 || r.Replayed {
		t.Fatalf("retry %+v", r)
	}
	if got := e.attemptStates(effectKey(eff.Identity)); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
}

func testUncertain(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	_, err := l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
			return nil, err
		}
		return nil, ledger.Uncertain(context.DeadlineExceeded) // the response was lost
	})
	if !errors.Is(err, ledger.ErrUncertain) {
		t.Fatalf("Do: %v", err)
	}
	r := mustDo(t, l, eff, e.charge(nil))
	if r.Attempt != 2 || e.prov.Effects() != 1 || e.prov.Requests() != 2 {
		t.Fatalf("retry %+v effects=%d requests=%d", r, e.prov.Effects(), e.prov.Requests())
	}
	if k := e.prov.Keys(); k[0] != k[1] {
		t.Fatalf("keys %v", k)
	}
	if got := e.attemptStates(effectKey(eff.Identity)); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
}

// holdEffect starts Do on eff in the background with a function that blocks
// until release is closed; it returns once the fire mark is written.
func (e *env) holdEffect(eff ledger.Effect) (release chan struct{}, done chan ledger.Result) {
	release, done = make(chan struct{}), make(chan ledger.Result, 1)
	firing := make(chan struct{})
	l := e.ledger()
	go func() {
		r, err := l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
			close(firing)
			<-release
			return e.prov.Call(ctx, c.ProviderKey, "held")
		})
		if err != nil {
			e.t.Errorf("holder: %v", err)
		}
		done <- r
	}()
	<-firing
	return release, done
}

func testInFlight(t *testing.T, e *env) {
	eff := e.effect()
	release, done := e.holdEffect(eff)
	var calls atomic.Int64
	_, err := e.ledger().Do(context.Background(), eff, e.charge(&calls))
	var ife *ledger.InFlightError
	if !errors.As(err, &ife) || ife.EffectID != eff.Identity.EffectID || ife.RetryAfter < time.Second {
		t.Fatalf("Do on a live claim: %v; want *InFlightError", err)
	}
	close(release)
	<-done
	if calls.Load() != 0 || e.prov.Effects() != 1 {
		t.Fatalf("calls=%d effects=%d", calls.Load(), e.prov.Effects())
	}
}

func testBoundedWait(t *testing.T, e *env) {
	eff := e.effect()
	release, done := e.holdEffect(eff)
	var once sync.Once
	var held ledger.Result
	sleeps := 0
	waiter := e.ledger(func(c *ledger.Config) {
		c.Wait, c.PollInterval = 10*time.Second, time.Second
		c.Test.Clock = ClockFuncs{NowFunc: e.clock.Now, SleepFunc: func(ctx context.Context, d time.Duration) error {
			sleeps++
			once.Do(func() { close(release); held = <-done })
			return nil
		}}
	})
	var calls atomic.Int64
	r, err := waiter.Do(context.Background(), eff, e.charge(&calls))
	if err != nil || !r.Replayed || !bytes.Equal(r.Value, held.Value) || calls.Load() != 0 || sleeps != 1 {
		t.Fatalf("waiter: %+v, %v, calls=%d sleeps=%d; want the holder's outcome after one wait", r, err, calls.Load(), sleeps)
	}
	// A wait that runs out returns *InFlightError after a bounded number of polls.
	eff2 := e.effect()
	release2, done2 := e.holdEffect(eff2)
	defer func() { close(release2); <-done2 }()
	polls := 0
	bounded := e.ledger(func(c *ledger.Config) {
		c.Wait, c.PollInterval = 3*time.Second, time.Second
		c.Test.Clock = ClockFuncs{NowFunc: e.clock.Now, SleepFunc: func(context.Context, time.Duration) error { polls++; return nil }}
	})
	if _, err := bounded.Do(context.Background(), eff2, e.charge(&calls)); !errors.Is(err, ledger.ErrInFlight) || polls != 3 {
		t.Fatalf("bounded wait: %v after %d polls; want ErrInFlight after 3", err, polls)
	}
}

func testRetention(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	mustDo(t, l, eff, e.charge(nil))
	rec := e.get(effectKey(eff.Identity))
	if rec.ExpiresAt.Sub(rec.UpdatedAt) < 14*24*time.Hour {
		t.Fatalf("retention %s, want >= 14 days", rec.ExpiresAt.Sub(rec.UpdatedAt))
	}
	e.clock.Advance(14*24*time.Hour - time.Minute)
	if r := mustDo(t, l, eff, e.charge(nil)); !r.Replayed {
		t.Fatal("effect re-fired inside retention")
	}
	// Past retention the record is absent to every condition even though no
	// emulator (and not DynamoDB, promptly) deletes it.
	e.clock.Advance(2 * time.Minute)
	if got, err := l.Lookup(context.Background(), eff.Identity.EffectID); err != nil || got != nil {
		t.Fatalf("Lookup past retention = %v, %v", got, err)
	}
	if r := mustDo(t, l, eff, e.charge(nil)); r.Replayed || r.Attempt != 1 {
		t.Fatalf("past retention: %+v; want a fresh record", r)
	}
	if _, err := ledger.New(ledger.Config{Store: e.store, Retention: 13 * 24 * time.Hour}); err == nil {
		t.Fatal("a retention below 14 days was accepted")
	}
}

func testStreamed(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	eff.Streamed = true
	eff.RequestDigest, eff.SemanticRecipe = "d1", "openwop-semantic-request-v2"
	body := "data: token token token"
	r := mustDo(t, l, eff, func(context.Context, ledger.Call) ([]byte, error) { return []byte(body), nil })
	if string(r.Value) != body || !r.Streamed || r.BodyDigest != sha256Hex(body) || r.BodySize != int64(len(body)) {
		t.Fatalf("first %+v", r)
	}
	rec := e.get(effectKey(eff.Identity))
	if rec.Outcome == nil || !rec.Outcome.OK || !rec.Outcome.Streamed || rec.Outcome.Value != nil || rec.RequestDigest != "d1" ||
		rec.Outcome.BodyDigest != sha256Hex(body) || rec.Outcome.BodySize != int64(len(body)) {
		t.Fatalf("streamed body cached or outcome/request not recorded: %+v %+v", rec, rec.Outcome)
	}
	d := mustDo(t, l, eff, e.charge(nil))
	if !d.Replayed || !d.Streamed || d.Value != nil || d.BodyDigest != r.BodyDigest || d.BodySize != r.BodySize {
		t.Fatalf("duplicate %+v", d)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// testDoStream: DoStream relays the provider's body to the writer of the
// attempt that fires, records the request digest, the final outcome and the
// body's digest and size but never the body (whose bytes must appear nowhere
// in the stored record), and a duplicate writes nothing and gets the
// metadata; a streamed failure is recorded as a failure, also without body.
func testDoStream(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	eff.RequestDigest, eff.SemanticRecipe = "d-stream", semantic.RecipeV2
	chunks := []string{"data: SECRET-TOKEN-1\n\n", "data: SECRET-TOKEN-2\n\n", "data: [DONE]\n\n"}
	stream := func(ctx context.Context, c ledger.Call, w io.Writer) error {
		if _, err := e.prov.Call(ctx, c.ProviderKey, "stream"); err != nil {
			return err
		}
		for _, ch := range chunks {
			if _, err := io.WriteString(w, ch); err != nil {
				return err
			}
		}
		return nil
	}
	var out bytes.Buffer
	r, err := l.DoStream(context.Background(), eff, &out, stream)
	body := strings.Join(chunks, "")
	if err != nil || r.Replayed || !r.Streamed || out.String() != body || r.Value != nil ||
		r.BodyDigest != sha256Hex(body) || r.BodySize != int64(len(body)) {
		t.Fatalf("DoStream: %+v %v wrote %q", r, err, out.String())
	}
	rec := e.get(effectKey(eff.Identity))
	if rec.State != ledger.StateCompleted || rec.Outcome == nil || !rec.Outcome.OK || !rec.Outcome.Streamed ||
		rec.Outcome.Value != nil || rec.RequestDigest != "d-stream" || rec.Outcome.BodyDigest != r.BodyDigest {
		t.Fatalf("record %+v outcome %+v", rec, rec.Outcome)
	}
	if dump := fmt.Sprintf("%+v %+v", rec, *rec.Outcome); strings.Contains(dump, "SECRET-TOKEN") {
		t.Fatalf("streamed body stored: %s", dump)
	}
	var dupOut bytes.Buffer
	var calls atomic.Int64
	d, err := e.ledger().DoStream(context.Background(), eff, &dupOut, func(ctx context.Context, c ledger.Call, w io.Writer) error {
		calls.Add(1)
		return stream(ctx, c, w)
	})
	if err != nil || !d.Replayed || !d.Streamed || dupOut.Len() != 0 || calls.Load() != 0 ||
		d.BodyDigest != r.BodyDigest || d.BodySize != r.BodySize || e.prov.Effects() != 1 {
		t.Fatalf("duplicate: %+v %v wrote %q calls %d", d, err, dupOut.String(), calls.Load())
	}
	// A different request under the same identity: mismatch, nothing written.
	other := eff
	other.RequestDigest = "d-other"
	if _, err := l.DoStream(context.Background(), other, &dupOut, stream); !errors.Is(err, ledger.ErrMismatch) || dupOut.Len() != 0 {
		t.Fatalf("mismatching stream: %v wrote %q", err, dupOut.String())
	}
	// A stream that fails half-way records the failure, not the partial body.
	failing := e.effect()
	cut := errors.New("upstream closed the stream")
	var partial bytes.Buffer
	_, err = l.DoStream(context.Background(), failing, &partial, func(ctx context.Context, c ledger.Call, w io.Writer) error {
		_, _ = io.WriteString(w, "data: SECRET-PARTIAL\n\n")
		return cut
	})
	if !errors.Is(err, ledger.ErrEffectFailed) || !errors.Is(err, cut) {
		t.Fatalf("failed stream: %v", err)
	}
	frec := e.get(effectKey(failing.Identity))
	if frec.Outcome == nil || frec.Outcome.OK || frec.Outcome.Value != nil || frec.Outcome.BodySize != int64(partial.Len()) ||
		strings.Contains(fmt.Sprintf("%+v", *frec.Outcome), "SECRET-PARTIAL") {
		t.Fatalf("failed stream outcome %+v", frec.Outcome)
	}
	if _, err := l.DoStream(context.Background(), e.effect(), nil, stream); err == nil {
		t.Fatal("nil writer accepted")
	}
	if _, err := l.DoStream(context.Background(), e.effect(), &partial, nil); err == nil {
		t.Fatal("nil stream function accepted")
	}
}

type seqFencer struct {
	mu     sync.Mutex
	tokens []uint64
	err    error
}

func (f *seqFencer) Token(context.Context, string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	t := f.tokens[0]
	f.tokens = f.tokens[1:]
	return t, nil
}

func testStaleFence(t *testing.T, e *env) {
	f := &seqFencer{tokens: []uint64{5, 3, 7}}
	l := e.ledger(func(c *ledger.Config) { c.Fencer = f })
	eff := e.effect()
	key := effectKey(eff.Identity)
	e.store.failOnce(ledger.StateCompleted, errCrash)
	if _, err := l.Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, errCrash) {
		t.Fatalf("attempt 1: %v", err)
	}
	if rec := e.get(key); rec.Fence != 5 {
		t.Fatalf("fence %d, want 5", rec.Fence)
	}
	e.clock.Advance(31 * time.Second)
	var calls atomic.Int64
	if _, err := l.Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, ledger.ErrStaleFence) || calls.Load() != 0 {
		t.Fatalf("attempt with a stale token: %v, calls %d; want ErrStaleFence and no fire", err, calls.Load())
	}
	if !strings.Contains(e.metrics.String(), ledger.MetricStaleFence) {
		t.Fatal("no stale-fence metric")
	}
	r := mustDo(t, l, eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if c.Fence != 7 {
			t.Errorf("call fence %d, want 7", c.Fence)
		}
		return e.prov.Call(ctx, c.ProviderKey, "charge")
	})
	if r.Attempt != 3 || e.prov.Effects() != 1 {
		t.Fatalf("attempt 3 %+v effects %d", r, e.prov.Effects())
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptReleased, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
}

func testFencerError(t *testing.T, e *env) {
	f := &seqFencer{err: errors.New("fence owner unreachable")}
	l := e.ledger(func(c *ledger.Config) { c.Fencer = f })
	eff := e.effect()
	var calls atomic.Int64
	if _, err := l.Do(context.Background(), eff, e.charge(&calls)); err == nil || calls.Load() != 0 {
		t.Fatalf("Do without a fence: %v calls %d", err, calls.Load())
	}
	f.mu.Lock()
	f.err, f.tokens = nil, []uint64{1}
	f.mu.Unlock()
	r := mustDo(t, l, eff, e.charge(&calls))
	if r.Attempt != 2 || calls.Load() != 1 {
		t.Fatalf("%+v", r)
	}
}
