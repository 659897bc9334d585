package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

var hardeningTests = []test{
	{"HeartbeatKeepsLongEffectAlive", testHeartbeatAlive},
	{"HeartbeatRefusedAfterReclaimStops", testHeartbeatReclaimed},
	{"HeartbeatRenewalErrorIsRetried", testHeartbeatRenewalError},
	{"HeartbeatFailingPastLeaseCancels", testHeartbeatFailingPastLease},
	{"HeartbeatStalledRenewalCancels", testHeartbeatStalledRenewal},
	{"HeartbeatStalledRenewalOfAShortLease", testHeartbeatStalledShortLease},
	{"HeartbeatGaveUpSuccessIsRecorded", testHeartbeatGaveUpSuccess},
	{"StreamCutByTheCallerIsUncertain", testStreamCutByCaller},
	{"CallerCancelledErrorIsUncertain", testCallerCancelledError},
	{"HeartbeatStopsOnPanic", testHeartbeatPanic},
	{"WritesAfterTheCallHaveTheirOwnDeadline", testDetachedWrites},
	{"MaxAttemptsReleased", testMaxAttemptsReleased},
	{"MaxAttemptsClosesStalledAttempt", testMaxAttemptsStalled},
	{"DefaultMaxAttemptsFitsTheStore", testDefaultMaxAttempts},
	{"ConfigBounds", testConfigBounds},
	{"OversizedValueNotRecorded", testOversizedValue},
	{"ClockSkew", testClockSkew},
	{"ClockSkewWhileRenewalsFail", testClockSkewWhileRenewalsFail},
	{"LeaseEndsAtItsInstant", testLeaseEndsAtItsInstant},
	{"RetentionExtendedByEveryWrite", testRetentionExtended},
	{"WitnessAttemptByAnotherRun", testWitnessAttemptOtherRun},
	{"WitnessSuppressedDuplicate", testWitnessDuplicate},
	{"WitnessReferenceVouchesOnlyForRecordsBeforeItsExpiry", testWitnessRefExpiry},
	{"RunRefErrorFiresNothing", testRunRefError},
	{"Race16RunsOneEffectWitnessed", testRaceRunsWitnessed},
}

// heldFn is an effect function that reports when it started firing and runs
// body once release is closed.
func heldFn(started chan<- context.Context, release <-chan struct{}, body ledger.Func) ledger.Func {
	return func(ctx context.Context, c ledger.Call) ([]byte, error) {
		started <- ctx
		<-release
		return body(ctx, c)
	}
}

// renewals records heartbeat renewal results on a channel.
func (e *env) renewals() chan error {
	ch := make(chan error, 64)
	e.store.onRenewal(func(ok bool, err error) {
		switch {
		case err != nil:
			ch <- err
		case !ok:
			ch <- ledger.ErrLeaseLost
		default:
			ch <- nil
		}
	})
	return ch
}

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// heartbeating returns an executor over the env's store and clock that
// renews its claims every interval, and the manual ticker that drives it.
func (e *env) heartbeating(every time.Duration) (*ledger.Ledger, *Ticker) {
	tk := NewTicker()
	return e.ledger(func(c *ledger.Config) {
		c.Heartbeat, c.Test.Clock = every, ClockFuncs{NowFunc: e.clock.Now, NewTickerFunc: tk.New}
	}), tk
}

// A fired attempt running past its lease keeps it through heartbeats: a
// second executor sees it in flight (not reclaimable) however far the clock
// moves, as long as renewals keep coming.
func testHeartbeatAlive(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	b := e.ledger()
	started, release := make(chan context.Context, 1), make(chan struct{})
	type out struct {
		r   ledger.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := a.Do(context.Background(), eff, heldFn(started, release, e.charge(nil)))
		done <- out{r, err}
	}()
	recv(t, started, "the fire")
	var calls atomic.Int64
	for i := range 4 { // 4 x 20s: far past the 30s lease
		e.clock.Advance(20 * time.Second)
		tk.Tick()
		if err := recv(t, renew, "a renewal"); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		if rec := e.get(key); !rec.LeaseUntil.Equal(e.clock.Now().Add(30*time.Second)) || rec.State != ledger.StateFiring {
			t.Fatalf("renewal %d: lease %s state %s; want now+30s, firing", i, rec.LeaseUntil, rec.State)
		}
		e.clock.Advance(25 * time.Second) // past the lease the previous write set
		if _, err := b.Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, ledger.ErrInFlight) {
			t.Fatalf("second executor during a renewed lease: %v; want ErrInFlight", err)
		}
		e.clock.Advance(-25 * time.Second)
	}
	close(release)
	o := recv(t, done, "Do")
	if o.err != nil || o.r.Replayed || o.r.Attempt != 1 || calls.Load() != 0 || e.prov.Effects() != 1 {
		t.Fatalf("long effect: %+v %v calls=%d effects=%d", o.r, o.err, calls.Load(), e.prov.Effects())
	}
	if tk.Started() != 1 || tk.Stopped() != 1 {
		t.Fatalf("ticker started %d stopped %d, want 1/1", tk.Started(), tk.Stopped())
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
}

// fireUntilLost starts l.Do(eff) in the background. Its effect calls the
// provider, hands its context to started, waits for that context to end (the
// claim lost) and then returns value; done receives Do's error.
func (e *env) fireUntilLost(l *ledger.Ledger, eff ledger.Effect, value string) (started <-chan context.Context, done <-chan error) {
	st, dn, _ := e.fireUntilCut(l, eff, func(context.Context) ([]byte, error) { return []byte(value), nil })
	return st, dn
}

// fireUntilCut is fireUntilLost with the effect function's answer once its
// context ends given by answer, and Do's result delivered too.
func (e *env) fireUntilCut(l *ledger.Ledger, eff ledger.Effect, answer func(ctx context.Context) ([]byte, error)) (started <-chan context.Context, done <-chan error, result <-chan ledger.Result) {
	st := make(chan context.Context, 1)
	dn := make(chan error, 1)
	rs := make(chan ledger.Result, 1)
	go func() {
		res, err := l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
			if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
				return nil, err
			}
			st <- ctx
			<-ctx.Done()
			return answer(ctx)
		})
		rs <- res
		dn <- err
	}()
	return st, dn, rs
}

// renewalsFailUntilCut makes every renewal fail (an injected store outage)
// and ticks the heartbeat of Heartbeat 10 s twice, so that its second
// failure gives up, and waits for the effect function's context fctx to be
// cut.
func (e *env) renewalsFailUntilCut(t *testing.T, tk *Ticker, renew <-chan error, fctx context.Context) {
	t.Helper()
	e.store.failRenewals(errors.New("injected store outage"))
	for range 2 {
		e.clock.Advance(10 * time.Second)
		tk.Tick()
		recv(t, renew, "a renewal")
	}
	recv(t, fctx.Done(), "the effect function's cancellation")
}

// stopsWithCause is an effect function's answer once its context ends: it
// stops with the context's cause, as a function that honours its context
// does.
func stopsWithCause(ctx context.Context) ([]byte, error) { return nil, context.Cause(ctx) }

// Once another executor reclaimed the claim (the owner stopped renewing, e.g.
// a long GC pause), the owner's next renewal is refused: the heartbeat stops,
// the effect function's context is cancelled with cause ErrLeaseLost, and its
// late outcome is refused, leaving the new owner's record untouched.
func testHeartbeatReclaimed(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	b := e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 })
	started, done := e.fireUntilLost(a, eff, "stale value from A")
	fctx := recv(t, started, "the fire")
	e.clock.Advance(10 * time.Second)
	tk.Tick()
	if err := recv(t, renew, "renewal 1"); err != nil {
		t.Fatalf("renewal 1: %v", err)
	}
	// A stalls: no tick for more than a lease; B reclaims and completes.
	e.clock.Advance(41 * time.Second)
	bRes := mustDo(t, b, eff, e.charge(nil))
	if bRes.Attempt != 2 || bRes.Replayed {
		t.Fatalf("B: %+v; want attempt 2 fired", bRes)
	}
	tk.Tick()
	if err := recv(t, renew, "renewal 2"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("renewal after the reclaim: %v; want refused", err)
	}
	err := recv(t, done, "A's Do")
	if !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("A: %v; want ErrLeaseLost", err)
	}
	if c := context.Cause(fctx); !errors.Is(c, ledger.ErrLeaseLost) {
		t.Fatalf("A's context cause %v; want ErrLeaseLost", c)
	}
	if tk.Started() != 1 || tk.Stopped() != 1 || tk.TryTick() {
		t.Fatalf("heartbeat still running: started %d stopped %d", tk.Started(), tk.Stopped())
	}
	select {
	case err := <-renew:
		t.Fatalf("renewal after the refusal: %v", err)
	default:
	}
	rec := e.get(key)
	if rec.Attempt != 2 || rec.Outcome == nil || !bytes.Equal(rec.Outcome.Value, bRes.Value) {
		t.Fatalf("record %+v; want B's outcome untouched", rec)
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
	if e.prov.Effects() != 1 {
		t.Fatalf("provider effects %d, want 1 (same provider key)", e.prov.Effects())
	}
}

// A renewal failing with a backend error does not stop the heartbeat nor
// the effect: the next tick renews.
func testHeartbeatRenewalError(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	started, release := make(chan context.Context, 1), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Do(context.Background(), eff, heldFn(started, release, e.charge(nil)))
		done <- err
	}()
	fctx := recv(t, started, "the fire")
	boom := errors.New("injected renewal failure")
	e.store.failOnce(ledger.StateFiring, boom)
	e.clock.Advance(10 * time.Second)
	tk.Tick()
	if err := recv(t, renew, "renewal 1"); !errors.Is(err, boom) {
		t.Fatalf("renewal 1: %v; want the injected error", err)
	}
	if fctx.Err() != nil {
		t.Fatal("a failed renewal cancelled the effect")
	}
	e.clock.Advance(10 * time.Second)
	tk.Tick()
	if err := recv(t, renew, "renewal 2"); err != nil {
		t.Fatalf("renewal 2: %v", err)
	}
	close(release)
	if err := recv(t, done, "Do"); err != nil {
		t.Fatal(err)
	}
	if rec := e.get(effectKey(eff.Identity)); rec.State != ledger.StateCompleted {
		t.Fatalf("state %s", rec.State)
	}
}

// Renewals that keep failing with errors (a store outage) are given up in
// time: once the next tick would come at or after the end of the lease last
// written, the effect function's context is cancelled with cause
// ErrLeaseLost while the clock is still before that lease end, the heartbeat
// stops, and Do returns ErrLeaseLost without recording the outcome. The
// attempt is left firing, as a refused renewal leaves it: inside its lease a
// second executor fires nothing and the witness shows it claimed; past it
// the witness shows it escaped and the second executor reclaims it and fires
// (same provider key) only after the first function's context has ended.
func testHeartbeatFailingPastLease(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	b := e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 })
	started, done, _ := e.fireUntilCut(a, eff, stopsWithCause)
	fctx := recv(t, started, "the fire")
	leaseEnd := e.get(key).LeaseUntil // written with the fire: now+30s
	boom := errors.New("injected store outage")
	e.store.failRenewals(boom)

	// +10s: the renewal fails; the next tick (+20s) comes before the lease
	// end, so a renewal may still land in time.
	e.clock.Advance(10 * time.Second)
	tk.Tick()
	if err := recv(t, renew, "renewal 1"); !errors.Is(err, boom) {
		t.Fatalf("renewal 1: %v; want the injected error", err)
	}
	if fctx.Err() != nil {
		t.Fatalf("cancelled while a renewal could still land: %v", context.Cause(fctx))
	}
	// +20s: fails again; the next tick (+30s) would come at the lease end.
	e.clock.Advance(10 * time.Second)
	tk.Tick()
	if err := recv(t, renew, "renewal 2"); !errors.Is(err, boom) {
		t.Fatalf("renewal 2: %v; want the injected error", err)
	}
	recv(t, fctx.Done(), "the effect function's cancellation, with the clock before the lease end")
	if now := e.clock.Now(); !now.Before(leaseEnd) {
		t.Fatalf("cancelled at %s, not before the lease end %s", now, leaseEnd)
	}
	if c := context.Cause(fctx); !errors.Is(c, ledger.ErrLeaseLost) {
		t.Fatalf("A's context cause %v; want ErrLeaseLost", c)
	}
	if err := recv(t, done, "A's Do"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("A: %v; want ErrLeaseLost", err)
	}
	if tk.Started() != 1 || tk.Stopped() != 1 || tk.TryTick() {
		t.Fatalf("heartbeat still running: started %d stopped %d", tk.Started(), tk.Stopped())
	}
	// Left for reclaim: firing, attempt 1, no outcome, the lease last written.
	rec := e.get(key)
	if rec.State != ledger.StateFiring || rec.Attempt != 1 || rec.Outcome != nil || !rec.LeaseUntil.Equal(leaseEnd) {
		t.Fatalf("record %s attempt %d outcome %+v lease %s; want firing, 1, none, %s",
			rec.State, rec.Attempt, rec.Outcome, rec.LeaseUntil, leaseEnd)
	}
	if got := rowStates(e.witness(b, eff.RunID, 1)); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptClaimed}) {
		t.Fatalf("witness inside the lease %v; want [claimed]", got)
	}

	e.store.failRenewals(nil)
	var calls atomic.Int64
	if _, err := b.Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("second executor inside the lease: %v; want ErrInFlight", err)
	}
	e.clock.Set(leaseEnd)
	if got := rowStates(e.witness(b, eff.RunID, 1)); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped}) {
		t.Fatalf("witness at the lease end %v; want [escaped]", got)
	}
	bRes, err := b.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if fctx.Err() == nil {
			t.Error("the second executor fired while the first effect function's context was live")
		}
		return e.charge(&calls)(ctx, c)
	})
	if err != nil || bRes.Attempt != 2 || bRes.Replayed || calls.Load() != 1 {
		t.Fatalf("B: %+v %v calls %d; want attempt 2 fired once", bRes, err, calls.Load())
	}
	e.wantReclaimedOnce(t, key)
}

// A renewal that stalls (a store that never answers) is bounded by a
// margin before the end of the lease last written (a quarter of the
// heartbeat, at most a second): it fails while that lease still holds and,
// no later tick being able to come before that end, the effect function's
// context is cancelled with cause ErrLeaseLost before any other executor
// may reclaim the attempt, and Do returns ErrLeaseLost without recording
// the outcome, the attempt left firing for a reclaim as escaped. The tick
// comes 3 s (of the executor's clock) before the lease end: the renewal is
// given what is left before the margin, 2 s.
func testHeartbeatStalledRenewal(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	started, done, _ := e.fireUntilCut(a, eff, stopsWithCause)
	fctx := recv(t, started, "the fire")
	leaseEnd := e.get(key).LeaseUntil
	given := e.store.stallRenewals()
	e.clock.Set(leaseEnd.Add(-3 * time.Second))
	tk.Tick()
	if d := recv(t, given, "the stalled renewal"); d > 2500*time.Millisecond {
		t.Fatalf("the stalled renewal was given %s although the lease ends in 3 s: it would fail at or after the lease end, when another executor may reclaim and fire", d)
	}
	wantCutByStalledRenewal(t, renew, fctx, done)
	if tk.Started() != 1 || tk.Stopped() != 1 || tk.TryTick() {
		t.Fatalf("heartbeat still running: started %d stopped %d", tk.Started(), tk.Stopped())
	}
	rec := e.get(key)
	if rec.State != ledger.StateFiring || rec.Attempt != 1 || rec.Outcome != nil || !rec.LeaseUntil.Equal(leaseEnd) {
		t.Fatalf("record %s attempt %d outcome %+v lease %s; want firing, 1, none, %s",
			rec.State, rec.Attempt, rec.Outcome, rec.LeaseUntil, leaseEnd)
	}
}

// wantCutByStalledRenewal checks the end of an attempt whose renewal
// stalled: the renewal fails on its own deadline, and the effect
// function's context (fctx) and its Do (done) end with ErrLeaseLost.
func wantCutByStalledRenewal(t *testing.T, renew <-chan error, fctx context.Context, done <-chan error) {
	t.Helper()
	if err := recv(t, renew, "the stalled renewal's failure"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stalled renewal: %v; want its deadline exceeded", err)
	}
	recv(t, fctx.Done(), "the effect function's cancellation")
	if c := context.Cause(fctx); !errors.Is(c, ledger.ErrLeaseLost) {
		t.Fatalf("A's context cause %v; want ErrLeaseLost", c)
	}
	if err := recv(t, done, "A's Do"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("A: %v; want ErrLeaseLost", err)
	}
}

// A short lease (2 s, the default heartbeat of a third of it: margin
// 167 ms) whose ticks come in time: the first renewal fails, the second
// (1.333 s after the fire, the lease ending 0.667 s later) stalls. It is
// given what is left before the margin, 0.5 s, like a renewal of a longer
// lease, and never the second a tick that came late gets: that second would
// keep the effect function running 0.333 s past the lease end, when another
// executor may reclaim the attempt and fire.
func testHeartbeatStalledShortLease(t *testing.T, e *env) {
	tk := NewTicker()
	a := e.ledger(func(c *ledger.Config) {
		c.Lease, c.Test.Clock = 2*time.Second, ClockFuncs{NowFunc: e.clock.Now, NewTickerFunc: tk.New}
	})
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	started, done, _ := e.fireUntilCut(a, eff, stopsWithCause)
	fctx := recv(t, started, "the fire")
	leaseEnd := e.get(key).LeaseUntil
	fired := leaseEnd.Add(-2 * time.Second)
	e.store.failRenewals(errors.New("injected store outage"))
	e.clock.Set(fired.Add(2 * time.Second / 3))
	tk.Tick()
	if err := recv(t, renew, "the first renewal's failure"); err == nil || errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("first renewal: %v; want the injected outage", err)
	}
	if fctx.Err() != nil {
		t.Fatal("one failed renewal cut the effect function although the next tick comes before the lease end")
	}
	given := e.store.stallRenewals()
	tick := fired.Add(4 * time.Second / 3)
	e.clock.Set(tick)
	tk.Tick()
	left := leaseEnd.Sub(tick) - (2*time.Second/3)/4 // before the margin
	if d := recv(t, given, "the stalled renewal"); d > left+50*time.Millisecond {
		t.Fatalf("the stalled renewal was given %s although the lease ends %s after its tick: it would fail %s past the lease end, when another executor may reclaim and fire, the effect function still running",
			d.Round(time.Millisecond), leaseEnd.Sub(tick), (d - leaseEnd.Sub(tick)).Round(time.Millisecond))
	}
	wantCutByStalledRenewal(t, renew, fctx, done)
	if rec := e.get(key); rec.State != ledger.StateFiring || rec.Outcome != nil || !rec.LeaseUntil.Equal(leaseEnd) {
		t.Fatalf("record %s outcome %+v lease %s; want firing, none, %s", rec.State, rec.Outcome, rec.LeaseUntil, leaseEnd)
	}
}

// An effect function whose heartbeat gave up (renewals failing until the
// lease could end) but that still returns a success has fired: the success
// is recorded, under the same fence as every outcome (the owner, the
// attempt, firing), so that no other executor fires it again.
//   - recorded: nobody reclaimed the attempt yet, so the write lands; Do
//     returns the value, and the next Do replays it without firing;
//   - unrecordable: the outcome write fails too; Do returns ErrLeaseLost
//     (with the store's error), and the attempt is reclaimed as escaped
//     once its lease ends, under the same provider key;
//   - reclaimed first: the lease ended and another executor reclaimed and
//     fired before the success came back; the late success is refused
//     (ErrLeaseLost) and the other executor's record stands.
func testHeartbeatGaveUpSuccess(t *testing.T, e *env) {
	giveUp := func(t *testing.T, e *env, streamed bool) (a *ledger.Ledger, eff ledger.Effect, key string, fctx context.Context, done <-chan error, result <-chan ledger.Result, leaseEnd time.Time) {
		t.Helper()
		a, tk := e.heartbeating(10 * time.Second)
		renew := e.renewals()
		eff = e.effect()
		eff.Streamed = streamed
		key = effectKey(eff.Identity)
		started, done, result := e.fireUntilCut(a, eff, func(context.Context) ([]byte, error) { return []byte("value from A"), nil })
		fctx = recv(t, started, "the fire")
		leaseEnd = e.get(key).LeaseUntil
		e.store.failRenewals(errors.New("injected store outage"))
		for i := range 2 {
			e.clock.Advance(10 * time.Second)
			tk.Tick()
			if err := recv(t, renew, "a renewal"); err == nil {
				t.Fatalf("renewal %d landed", i+1)
			}
		}
		recv(t, fctx.Done(), "the effect function's cancellation")
		if c := context.Cause(fctx); !errors.Is(c, ledger.ErrLeaseLost) {
			t.Fatalf("A's context cause %v; want ErrLeaseLost", c)
		}
		return a, eff, key, fctx, done, result, leaseEnd
	}

	t.Run("recorded", func(t *testing.T) {
		e := e.fresh(t)
		_, eff, key, _, done, result, _ := giveUp(t, e, false)
		if err := recv(t, done, "A's Do"); err != nil {
			t.Fatalf("A: %v; want its success, recorded", err)
		}
		if res := recv(t, result, "A's result"); string(res.Value) != "value from A" || res.Replayed {
			t.Fatalf("A: %+v; want its own value", res)
		}
		rec := e.get(key)
		if rec.State != ledger.StateCompleted || rec.Outcome == nil || !rec.Outcome.OK || string(rec.Outcome.Value) != "value from A" {
			t.Fatalf("record %s outcome %+v; want completed with A's value", rec.State, rec.Outcome)
		}
		var calls atomic.Int64
		e.clock.Advance(time.Hour) // long past the lease: still a replay
		res, err := e.ledger().Do(context.Background(), eff, e.charge(&calls))
		if err != nil || !res.Replayed || string(res.Value) != "value from A" || calls.Load() != 0 {
			t.Fatalf("next Do: %+v %v calls %d; want A's value replayed, nothing fired", res, err, calls.Load())
		}
		if e.prov.Effects() != 1 || e.prov.Requests() != 1 {
			t.Fatalf("provider effects %d requests %d; want 1, 1", e.prov.Effects(), e.prov.Requests())
		}
	})

	// Do with Effect.Streamed: the function returns its body whole (Do
	// hashes the value it returned), so, unlike DoStream's relay, the
	// give-up's cancellation cut nothing, and its success is recorded
	// (the body's digest and size, not the body).
	t.Run("streamed by Do, a whole value", func(t *testing.T) {
		e := e.fresh(t)
		_, _, key, _, done, result, _ := giveUp(t, e, true)
		if err := recv(t, done, "A's Do"); err != nil {
			t.Fatalf("A: %v; want its success, recorded", err)
		}
		if res := recv(t, result, "A's result"); string(res.Value) != "value from A" || res.BodySize != int64(len("value from A")) {
			t.Fatalf("A: %+v; want its own value and body size", res)
		}
		rec := e.get(key)
		if rec.State != ledger.StateCompleted || rec.Outcome == nil || !rec.Outcome.OK || rec.Outcome.BodySize != int64(len("value from A")) {
			t.Fatalf("record %s outcome %+v; want completed with the body's size", rec.State, rec.Outcome)
		}
		if e.prov.Effects() != 1 || e.prov.Requests() != 1 {
			t.Fatalf("provider effects %d requests %d; want 1, 1", e.prov.Effects(), e.prov.Requests())
		}
	})

	t.Run("unrecordable", func(t *testing.T) {
		e := e.fresh(t)
		boom := errors.New("injected outcome write failure")
		e.store.failOnce(ledger.StateCompleted, boom)
		_, eff, key, _, done, _, leaseEnd := giveUp(t, e, false)
		if err := recv(t, done, "A's Do"); !errors.Is(err, ledger.ErrLeaseLost) || !errors.Is(err, boom) || !errors.Is(err, ledger.ErrOutcomeNotRecorded) {
			t.Fatalf("A: %v; want ErrLeaseLost and the store's error", err)
		}
		if rec := e.get(key); rec.State != ledger.StateFiring || rec.Attempt != 1 || rec.Outcome != nil {
			t.Fatalf("record %s attempt %d outcome %+v; want firing, 1, none", rec.State, rec.Attempt, rec.Outcome)
		}
		e.store.failRenewals(nil)
		e.clock.Set(leaseEnd)
		var calls atomic.Int64
		res, err := e.ledger().Do(context.Background(), eff, e.charge(&calls))
		if err != nil || res.Attempt != 2 || calls.Load() != 1 {
			t.Fatalf("B: %+v %v calls %d; want attempt 2 fired once", res, err, calls.Load())
		}
		e.wantReclaimedOnce(t, key)
	})

	// The success's outcome write is applied but its answer lost (the
	// store wrote it, then the call failed): whatever Do tells the first
	// caller, the effect is recorded, so the next Do replays A's value
	// and the provider sees one effect, one request.
	t.Run("applied, answer lost", func(t *testing.T) {
		e := e.fresh(t)
		lost := errors.New("injected answer lost after the write applied")
		e.store.loseAnswerOnce(ledger.StateCompleted, lost)
		_, eff, key, _, done, _, leaseEnd := giveUp(t, e, false)
		// A learns only the error (the loss was injected on its outcome
		// write, so the error carries it); what it is told is not the
		// guarantee, the record is.
		if err := recv(t, done, "A's Do"); !errors.Is(err, lost) {
			t.Fatalf("A: %v; want the lost answer's error (the fault on its outcome write)", err)
		}
		rec := e.get(key)
		if rec.State != ledger.StateCompleted || rec.Attempt != 1 || rec.Outcome == nil || !rec.Outcome.OK || string(rec.Outcome.Value) != "value from A" {
			t.Fatalf("record %s attempt %d outcome %+v; want completed by attempt 1 with A's value", rec.State, rec.Attempt, rec.Outcome)
		}
		e.store.failRenewals(nil)
		for _, at := range []time.Time{leaseEnd, leaseEnd.Add(time.Hour)} {
			e.clock.Set(at) // at the lease's end and long past it: a replay
			var calls atomic.Int64
			res, err := e.ledger().Do(context.Background(), eff, e.charge(&calls))
			if err != nil || !res.Replayed || res.Attempt != 1 || string(res.Value) != "value from A" || calls.Load() != 0 {
				t.Fatalf("next Do at %s: %+v %v calls %d; want A's value replayed, nothing fired", at, res, err, calls.Load())
			}
		}
		if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptCompleted}) {
			t.Fatalf("attempts %v; want one, completed", got)
		}
		if e.prov.Effects() != 1 || e.prov.Requests() != 1 {
			t.Fatalf("provider effects %d requests %d; want 1, 1", e.prov.Effects(), e.prov.Requests())
		}
	})

	// A streamed effect's body is cut by the same cancellation: a stream
	// function that swallows it and returns nil has relayed only part of
	// the body, so its success is not recorded (the body's digest and size
	// would describe a truncated stream). The attempt stays firing and is
	// reclaimed as escaped after its lease, under the same provider key.
	t.Run("streamed, cut", func(t *testing.T) {
		e := e.fresh(t)
		a, tk := e.heartbeating(10 * time.Second)
		renew := e.renewals()
		eff := e.effect()
		key := effectKey(eff.Identity)
		started := make(chan context.Context, 1)
		done := make(chan error, 1)
		var body bytes.Buffer
		go func() {
			_, err := a.DoStream(context.Background(), eff, &body, func(ctx context.Context, c ledger.Call, w io.Writer) error {
				if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
					return err
				}
				_, _ = io.WriteString(w, "data: part one\n\n")
				started <- ctx
				<-ctx.Done()
				return nil // the relay stopped with its context, and says nothing
			})
			done <- err
		}()
		fctx := recv(t, started, "the fire")
		leaseEnd := e.get(key).LeaseUntil
		e.renewalsFailUntilCut(t, tk, renew, fctx)
		if err := recv(t, done, "A's DoStream"); !errors.Is(err, ledger.ErrLeaseLost) {
			t.Fatalf("A: %v; want ErrLeaseLost (its cut stream not recorded as a success)", err)
		}
		if rec := e.get(key); rec.State != ledger.StateFiring || rec.Attempt != 1 || rec.Outcome != nil {
			t.Fatalf("record %s attempt %d outcome %+v; want firing, 1, none", rec.State, rec.Attempt, rec.Outcome)
		}
		e.store.failRenewals(nil)
		e.clock.Set(leaseEnd)
		var whole bytes.Buffer
		res, err := e.ledger().DoStream(context.Background(), eff, &whole, func(ctx context.Context, c ledger.Call, w io.Writer) error {
			if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
				return err
			}
			_, err := io.WriteString(w, "data: part one\n\ndata: part two\n\n")
			return err
		})
		if err != nil || res.Attempt != 2 || res.BodySize != int64(whole.Len()) {
			t.Fatalf("B: %+v %v; want attempt 2 with the whole body", res, err)
		}
		e.wantReclaimedOnce(t, key)
	})

	t.Run("reclaimed first", func(t *testing.T) {
		e := e.fresh(t)
		release := make(chan struct{})
		a, tk := e.heartbeating(10 * time.Second)
		renew := e.renewals()
		eff := e.effect()
		key := effectKey(eff.Identity)
		started, done, _ := e.fireUntilCut(a, eff, func(context.Context) ([]byte, error) {
			<-release // B reclaims and fires first
			return []byte("late value from A"), nil
		})
		fctx := recv(t, started, "the fire")
		leaseEnd := e.get(key).LeaseUntil
		e.renewalsFailUntilCut(t, tk, renew, fctx)
		e.store.failRenewals(nil)
		e.clock.Set(leaseEnd)
		var calls atomic.Int64
		res, err := e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 }).Do(context.Background(), eff, e.charge(&calls))
		if err != nil || res.Attempt != 2 || calls.Load() != 1 {
			t.Fatalf("B: %+v %v calls %d; want attempt 2 fired once", res, err, calls.Load())
		}
		close(release)
		if err := recv(t, done, "A's Do"); !errors.Is(err, ledger.ErrLeaseLost) {
			t.Fatalf("A: %v; want ErrLeaseLost (its late success refused)", err)
		}
		rec := e.get(key)
		if rec.State != ledger.StateCompleted || rec.Attempt != 2 || rec.Outcome == nil || string(rec.Outcome.Value) == "late value from A" {
			t.Fatalf("record %s attempt %d outcome %+v; want B's completion", rec.State, rec.Attempt, rec.Outcome)
		}
	})
}

// A streamed effect whose caller's context ends while it relays its body
// (a client gone, a deadline): a stream function that stops with its
// context and returns nil relayed only part of the body, so its success is
// not recorded (its digest and size would describe a truncated stream, and
// every duplicate would be told the effect completed with it). DoStream
// returns ErrUncertain with the context's error, the attempt is released
// as escaped, and the next DoStream fires again under the same provider
// key and records the whole body.
func testStreamCutByCaller(t *testing.T, e *env) {
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		streamCutByCaller(t, e.fresh(t), ctx, func() { cancel() }, context.Canceled, -1, false)
	})
	// A relay that says why it stopped (io.Copy's error: the context's)
	// is cut all the same: its error is not recorded as the effect's
	// failure, which would tell every duplicate the effect failed, with
	// the cut body's digest and size, and never fire it again.
	t.Run("cancelled, its error returned", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		streamCutByCaller(t, e.fresh(t), ctx, func() { cancel() }, context.Canceled, -1, true)
	})
	// The caller's context may itself end with cause ErrLeaseLost: the
	// context of an outer effect function whose heartbeat gave up or found
	// its claim reclaimed. That is still the caller's context ending, not
	// this attempt's lease (whose heartbeat here renews nothing and never
	// gives up), so the cut stream is uncertain all the same.
	t.Run("outer lease lost", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		streamCutByCaller(t, e.fresh(t), ctx, func() { cancel(ledger.ErrLeaseLost) }, ledger.ErrLeaseLost, 10*time.Second, false)
	})
}

// streamCutByCaller fires a streamed effect under ctx, ends ctx with end
// while the stream function relays its body (it then returns nil, or its
// context's error when relayErr), and checks DoStream returns
// ErrUncertain, context.Canceled and cause, no outcome is recorded (no
// success, no failure), and the next DoStream fires again under the same
// provider key. heartbeat is the first executor's Config.Heartbeat: -1 for
// none, else a heartbeat whose ticker never ticks.
func streamCutByCaller(t *testing.T, e *env, ctx context.Context, end func(), cause error, heartbeat time.Duration, relayErr bool) {
	var l *ledger.Ledger
	if heartbeat > 0 {
		l, _ = e.heartbeating(heartbeat)
	} else {
		l = e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 })
	}
	eff := e.effect()
	key := effectKey(eff.Identity)
	started := make(chan struct{})
	done := make(chan error, 1)
	var part bytes.Buffer
	go func() {
		_, err := l.DoStream(ctx, eff, &part, func(ctx context.Context, c ledger.Call, w io.Writer) error {
			if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
				return err
			}
			_, _ = io.WriteString(w, "data: part one\n\n")
			close(started)
			<-ctx.Done()
			if relayErr {
				return ctx.Err() // the relay stopped with its context, and says so
			}
			return nil // the relay stopped with its context, and says nothing
		})
		done <- err
	}()
	recv(t, started, "the fire")
	end()
	if err := recv(t, done, "A's DoStream"); !errors.Is(err, ledger.ErrUncertain) || !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("A: %v; want ErrUncertain, context.Canceled and %v (its cut stream not recorded as a success)", err, cause)
	}
	if rec := e.get(key); rec.Outcome != nil {
		t.Fatalf("record %s outcome %+v; want no outcome recorded for a cut stream", rec.State, rec.Outcome)
	}
	var whole bytes.Buffer
	res, err := e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 }).DoStream(context.Background(), eff, &whole, func(ctx context.Context, c ledger.Call, w io.Writer) error {
		if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
			return err
		}
		_, err := io.WriteString(w, "data: part one\n\ndata: part two\n\n")
		return err
	})
	if err != nil || res.Replayed || res.Attempt != 2 || res.BodySize != int64(whole.Len()) {
		t.Fatalf("B: %+v %v; want attempt 2 with the whole body", res, err)
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
	if rec := e.get(key); rec.Outcome == nil || rec.Outcome.BodySize != int64(whole.Len()) {
		t.Fatalf("record outcome %+v; want the whole body's size %d", rec.Outcome, whole.Len())
	}
	if e.prov.Effects() != 1 || e.prov.Requests() != 2 {
		t.Fatalf("provider effects %d requests %d; want 1 effect (same provider key), 2 requests", e.prov.Effects(), e.prov.Requests())
	}
}

// An effect function whose request is cut by its caller's context (a
// client gone, a deadline) returns that context's error, as an HTTP client
// does: the request may have reached the provider, so the error is not
// recorded as the effect's failure (every duplicate would be told it
// failed, and it would never fire again). The attempt ends as uncertain:
// escaped, fired again under the same provider key. What the function
// classified itself (NotSent) stands, and a value it returned whole is
// recorded.
func testCallerCancelledError(t *testing.T, e *env) {
	cut := func(t *testing.T, e *env, answer func(ctx context.Context) ([]byte, error)) (ledger.Effect, string, error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		eff := e.effect()
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := e.ledger(func(c *ledger.Config) { c.Heartbeat = -1 }).Do(ctx, eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
				if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
					return nil, err
				}
				close(started)
				<-ctx.Done()
				return answer(ctx)
			})
			done <- err
		}()
		recv(t, started, "the fire")
		cancel()
		return eff, effectKey(eff.Identity), recv(t, done, "A's Do")
	}
	t.Run("its error", func(t *testing.T) {
		e := e.fresh(t)
		eff, key, err := cut(t, e, func(ctx context.Context) ([]byte, error) {
			return nil, fmt.Errorf("post https://provider.example/charges: %w", ctx.Err())
		})
		var failed *ledger.FailedError
		if !errors.Is(err, ledger.ErrUncertain) || !errors.Is(err, context.Canceled) || errors.As(err, &failed) {
			t.Fatalf("A: %v; want ErrUncertain and context.Canceled, not a recorded failure", err)
		}
		if rec := e.get(key); rec.Outcome != nil {
			t.Fatalf("record %s outcome %+v; want none", rec.State, rec.Outcome)
		}
		var calls atomic.Int64
		res, err := e.ledger().Do(context.Background(), eff, e.charge(&calls))
		if err != nil || res.Replayed || res.Attempt != 2 || calls.Load() != 1 {
			t.Fatalf("B: %+v %v calls %d; want attempt 2 fired once", res, err, calls.Load())
		}
		e.wantReclaimedOnce(t, key)
	})
	t.Run("not sent", func(t *testing.T) {
		e := e.fresh(t)
		_, key, err := cut(t, e, func(ctx context.Context) ([]byte, error) { return nil, ledger.NotSent(ctx.Err()) })
		if !errors.Is(err, ledger.ErrNotSent) || errors.Is(err, ledger.ErrUncertain) {
			t.Fatalf("A: %v; want the function's own NotSent", err)
		}
		if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased}) {
			t.Fatalf("attempts %v; want released", got)
		}
	})
	t.Run("a whole value", func(t *testing.T) {
		e := e.fresh(t)
		_, key, err := cut(t, e, func(context.Context) ([]byte, error) { return []byte("ch_1"), nil })
		if err != nil {
			t.Fatalf("A: %v; want its success", err)
		}
		if rec := e.get(key); rec.Outcome == nil || !rec.Outcome.OK || string(rec.Outcome.Value) != "ch_1" {
			t.Fatalf("record %s outcome %+v; want the value recorded", rec.State, rec.Outcome)
		}
	})
}

// A panicking effect function stops its heartbeat (the record stays firing
// and is reclaimed as escaped once the lease runs out).
func testHeartbeatPanic(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	eff := e.effect()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		_, _ = a.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) { panic("boom") })
	}()
	if tk.Started() != 1 || tk.Stopped() != 1 || tk.TryTick() {
		t.Fatalf("heartbeat not stopped after a panic: %d/%d", tk.Started(), tk.Stopped())
	}
	e.clock.Advance(31 * time.Second)
	r := mustDo(t, e.ledger(), eff, e.charge(nil))
	if r.Attempt != 2 {
		t.Fatalf("%+v", r)
	}
	if got := e.attemptStates(effectKey(eff.Identity)); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
}

func testMaxAttemptsReleased(t *testing.T, e *env) {
	l := e.ledger(func(c *ledger.Config) { c.MaxAttempts = 3 })
	eff := e.effect()
	notSent := func(context.Context, ledger.Call) ([]byte, error) { return nil, ledger.NotSent(errors.New("dns")) }
	for i := range 3 {
		if _, err := l.Do(context.Background(), eff, notSent); !errors.Is(err, ledger.ErrNotSent) {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
	}
	var calls atomic.Int64
	_, err := l.Do(context.Background(), eff, e.charge(&calls))
	var ae *ledger.AttemptsExhaustedError
	if !errors.As(err, &ae) || !errors.Is(err, ledger.ErrAttemptsExhausted) || ae.Attempts != 3 || ae.Escaped || calls.Load() != 0 {
		t.Fatalf("4th Do: %v (%+v) calls=%d; want *AttemptsExhaustedError and no fire", err, ae, calls.Load())
	}
	if rec := e.get(effectKey(eff.Identity)); len(rec.Attempts) != 3 || rec.State != ledger.StateReleased {
		t.Fatalf("record grew: %d attempts, state %s", len(rec.Attempts), rec.State)
	}
}

// At the cap, a stalled attempt that passed the fire mark is closed as
// escaped (no new attempt, nothing fired) and reported in the error.
func testMaxAttemptsStalled(t *testing.T, e *env) {
	l := e.ledger(func(c *ledger.Config) { c.MaxAttempts = 2 })
	eff := e.effect()
	key := effectKey(eff.Identity)
	if _, err := l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	e.store.failOnce(ledger.StateCompleted, errCrash)
	if _, err := l.Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	// Live lease: in flight, not exhausted.
	if _, err := l.Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("during the lease: %v", err)
	}
	e.clock.Advance(31 * time.Second)
	var calls atomic.Int64
	_, err := e.ledger(func(c *ledger.Config) { c.MaxAttempts = 2 }).Do(context.Background(), eff, e.charge(&calls))
	var ae *ledger.AttemptsExhaustedError
	if !errors.As(err, &ae) || !ae.Escaped || ae.Attempts != 2 || calls.Load() != 0 {
		t.Fatalf("Do at the cap: %v (%+v) calls %d", err, ae, calls.Load())
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptEscaped}) {
		t.Fatalf("attempts %v; want [released escaped]", got)
	}
	if rec := e.get(key); rec.State != ledger.StateReleased {
		t.Fatalf("state %s", rec.State)
	}
	if !strings.Contains(e.metrics.String(), ledger.MetricEscaped) {
		t.Fatal("no escaped metric")
	}
	if e.prov.Effects() != 1 || e.prov.Requests() != 1 {
		t.Fatalf("provider %d/%d", e.prov.Effects(), e.prov.Requests())
	}
}

// DefaultMaxAttempts attempts fit in one record of the store (400 KB on
// DynamoDB), with long run, node and invocation ids.
func testDefaultMaxAttempts(t *testing.T, e *env) {
	l := e.ledger()
	long := func(c byte) string { return strings.Repeat(string(c), 120) }
	id := e.business("charge", "order-"+rnd(6))
	var last error
	for i := range ledger.DefaultMaxAttempts {
		eff := ledger.Effect{Identity: id, RunID: e.tenant + "/" + fmt.Sprintf("%03d", i) + long('r'), NodeID: long('n'), InvocationID: long('i')}
		_, last = l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("timeout"))
		})
		if !errors.Is(last, ledger.ErrUncertain) {
			t.Fatalf("attempt %d: %v", i+1, last)
		}
	}
	var calls atomic.Int64
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id}, e.charge(&calls)); !errors.Is(err, ledger.ErrAttemptsExhausted) || calls.Load() != 0 {
		t.Fatalf("attempt %d: %v calls %d", ledger.DefaultMaxAttempts+1, err, calls.Load())
	}
	if rec := e.get(effectKey(id)); len(rec.Attempts) != ledger.DefaultMaxAttempts {
		t.Fatalf("%d attempts", len(rec.Attempts))
	}
}

func testConfigBounds(t *testing.T, e *env) {
	bad := map[string]ledger.Config{
		"heartbeat = lease": {Store: e.store, Lease: 30 * time.Second, Heartbeat: 30 * time.Second},
		"heartbeat > lease": {Store: e.store, Lease: 30 * time.Second, Heartbeat: time.Minute},
		// The first renewal, in time, would have to end before it began:
		// a second before the lease end, which comes 0.5 s after it.
		"heartbeat leaves no room to renew": {Store: e.store, Lease: 30 * time.Second, Heartbeat: 29500 * time.Millisecond},
		"max attempts < 0":                  {Store: e.store, MaxAttempts: -1},
		"max attempts > max":                {Store: e.store, MaxAttempts: ledger.MaxMaxAttempts + 1},
		"retention < 14 days":               {Store: e.store, Retention: time.Hour},
		"value cap < 0":                     {Store: e.store, MaxValueBytes: -1},
		"value cap > max":                   {Store: e.store, MaxValueBytes: ledger.MaxMaxValueBytes + 1},
		"outcome timeout < 0":               {Store: e.store, OutcomeTimeout: -time.Second},
	}
	for name, cfg := range bad {
		if _, err := ledger.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ledger.New(ledger.Config{Store: e.store, Heartbeat: -1}); err != nil {
		t.Errorf("disabled heartbeat: %v", err)
	}
	for _, c := range []ledger.Config{
		{Store: e.store, Lease: time.Second},                                           // 333 ms, renewals end 83 ms before
		{Store: e.store, Lease: 30 * time.Second, Heartbeat: 28900 * time.Millisecond}, // 100 ms to renew
	} {
		if _, err := ledger.New(c); err != nil {
			t.Errorf("lease %s, heartbeat %s: %v", c.Lease, c.Heartbeat, err)
		}
	}
}

// Bug found in review: reclaims and fire marks did not extend the record's
// retention, so an attempt started just before the record's retention ended
// had its outcome refused (the record counted as absent), and the next Do
// created a fresh record and fired again.
func testRetentionExtended(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	if _, err := l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	e.clock.Advance(ledger.MinRetention - 10*time.Second)
	var calls atomic.Int64
	r, err := l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		calls.Add(1)
		e.clock.Advance(20 * time.Second) // the provider call crosses the original retention
		return e.prov.Call(ctx, c.ProviderKey, "charge")
	})
	if err != nil || r.Attempt != 2 {
		t.Fatalf("attempt across the original retention: %+v %v", r, err)
	}
	d, err := l.Do(context.Background(), eff, e.charge(&calls))
	if err != nil || !d.Replayed || calls.Load() != 1 {
		t.Fatalf("duplicate: %+v %v calls %d; want the recorded outcome", d, err, calls.Load())
	}
	rec := e.get(effectKey(eff.Identity))
	if rec.ExpiresAt.Sub(rec.UpdatedAt) < ledger.MinRetention {
		t.Fatalf("retention after the outcome %s", rec.ExpiresAt.Sub(rec.UpdatedAt))
	}
}

// witness reads runID's projection once the (eventually consistent) index
// shows n rows, validating it against the schema.
func (e *env) witness(l *ledger.Ledger, runID string, n int) ledger.Projection {
	e.t.Helper()
	var p ledger.Projection
	eventually(e.t, func() string {
		var err error
		if p, err = l.Witness(context.Background(), runID); err != nil {
			e.t.Fatal(err)
		}
		if len(p.Effects) != n {
			return fmt.Sprintf("witness of %s has %d rows, want %d: %+v", runID, len(p.Effects), n, p.Effects)
		}
		return ""
	})
	ValidateProjection(e.t, p)
	return p
}

func rowStates(p ledger.Projection) []ledger.AttemptState {
	var s []ledger.AttemptState
	for _, r := range p.Effects {
		s = append(s, r.State)
	}
	return s
}

// A run that makes an attempt at an effect another run created sees it in its
// own witness; both witnesses show the same rows.
func testWitnessAttemptOtherRun(t *testing.T, e *env) {
	id := e.business("refund", "o-"+rnd(4))
	runA, runB, runC := e.runID(), e.runID(), e.runID()
	l := e.ledger()
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id, RunID: runA, NodeID: "refund"}, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	e.resetRT()
	rb := mustDo(t, l, ledger.Effect{Identity: id, RunID: runB, NodeID: "compensate"}, e.charge(nil))
	// failed claim, run reference, reclaim (written firing: no Fencer),
	// outcome
	e.checkRT("reclaim by another run", 4, 3+e.h.DuplicateRoundTrips)
	if rb.Attempt != 2 || rb.Replayed {
		t.Fatalf("B: %+v", rb)
	}
	// B's retry is a plain duplicate: B is in the record, no reference write.
	e.resetRT()
	if r := mustDo(t, l, ledger.Effect{Identity: id, RunID: runB, NodeID: "compensate"}, e.charge(nil)); !r.Replayed {
		t.Fatal("B's retry fired")
	}
	e.checkRT("B's duplicate", 1, e.h.DuplicateRoundTrips)
	pa, pb := e.witness(l, runA, 2), e.witness(l, runB, 2)
	want := []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}
	if !slices.Equal(rowStates(pa), want) || !slices.Equal(rowStates(pb), want) {
		t.Fatalf("rows A %v B %v; want %v", rowStates(pa), rowStates(pb), want)
	}
	for i := range pb.Effects {
		ra, rbw := pa.Effects[i], pb.Effects[i]
		if ra != rbw || rbw.EffectID != id.EffectID || rbw.ProviderKey != id.ProviderKey {
			t.Fatalf("row %d differs: A %+v B %+v", i, ra, rbw)
		}
	}
	if pb.Effects[0].NodeID != "refund" || pb.Effects[1].NodeID != "compensate" {
		t.Fatalf("nodes %+v", pb.Effects)
	}
	// A run suppressed without WitnessDuplicates: one round trip, not listed.
	e.resetRT()
	if r := mustDo(t, l, ledger.Effect{Identity: id, RunID: runC, NodeID: "x"}, e.charge(nil)); !r.Replayed {
		t.Fatal("C fired")
	}
	e.checkRT("C's duplicate", 1, e.h.DuplicateRoundTrips)
	if p, err := l.Witness(context.Background(), runC); err != nil || len(p.Effects) != 0 {
		t.Fatalf("C's witness %+v %v", p, err)
	}
}

// With WitnessDuplicates, "the same business identity reached from two
// different runs fires once" and both runs' witnesses show the recorded
// effect, with no extra row for the suppressed duplicate.
func testWitnessDuplicate(t *testing.T, e *env) {
	id := e.business("refund", "o-"+rnd(4))
	run1, run2 := e.runID(), e.runID()
	l := e.ledger(func(c *ledger.Config) { c.WitnessDuplicates = true })
	var calls atomic.Int64
	e.resetRT()
	mustDo(t, l, ledger.Effect{Identity: id, RunID: run1, NodeID: "refund"}, e.charge(&calls))
	e.checkRT("first effect", 2, 2)
	e.resetRT()
	r2 := mustDo(t, l, ledger.Effect{Identity: id, RunID: run2, NodeID: "compensate"}, e.charge(&calls))
	e.checkRT("duplicate from another run with WitnessDuplicates", 2, e.h.DuplicateRoundTrips+1)
	if !r2.Replayed || calls.Load() != 1 || e.prov.Effects() != 1 {
		t.Fatalf("run 2: %+v calls %d", r2, calls.Load())
	}
	// The creator run's own duplicate never pays for a reference.
	e.resetRT()
	mustDo(t, l, ledger.Effect{Identity: id, RunID: run1, NodeID: "refund"}, e.charge(&calls))
	e.checkRT("creator's duplicate", 1, e.h.DuplicateRoundTrips)
	p1, p2 := e.witness(l, run1, 1), e.witness(l, run2, 1)
	if p1.Effects[0] != p2.Effects[0] || p2.Effects[0].State != ledger.AttemptCompleted ||
		p2.Effects[0].Attempt != 1 || p2.Effects[0].ProviderKey != id.ProviderKey || p2.Effects[0].NodeID != "refund" {
		t.Fatalf("witnesses differ: %+v vs %+v", p1.Effects, p2.Effects)
	}
}

// A run reference is kept Retention from the contact it records. One that
// has expired (TTL deletion is lazy, and the emulators never delete) no
// longer vouches for a record created after its expiry: that is a later
// effect under the same identity, which the run never reached, and its
// witness leaves it out, also under WitnessDuplicates (where a record the
// run neither created nor made an attempt at is listed on the reference
// alone). A record holding the run's own attempt is listed as long as it
// is kept, whatever its reference's expiry: the record itself shows the
// attempt.
func testWitnessRefExpiry(t *testing.T, e *env) {
	l := e.ledger(func(c *ledger.Config) { c.WitnessDuplicates = true })
	ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("re_1"), nil }
	// A suppressed duplicate's reference, then the identity re-created
	// once both the record and the reference have expired.
	id := e.business("refund", "o-"+rnd(4))
	run1, run2, run3 := e.runID(), e.runID(), e.runID()
	mustDo(t, l, ledger.Effect{Identity: id, RunID: run1, NodeID: "refund"}, ok)
	e.clock.Advance(time.Hour)
	if r := mustDo(t, l, ledger.Effect{Identity: id, RunID: run2, NodeID: "compensate"}, ok); !r.Replayed {
		t.Fatalf("run2 fired: %+v", r)
	}
	e.witness(l, run2, 1)
	e.clock.Advance(ledger.MinRetention + time.Minute)
	if r := mustDo(t, l, ledger.Effect{Identity: id, RunID: run3, NodeID: "refund"}, ok); r.Replayed {
		t.Fatalf("run3 after the record's retention: %+v; want a new effect", r)
	}
	e.witness(l, run3, 1)
	p, err := l.Witness(context.Background(), run2)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range p.Effects {
		t.Errorf("run2's expired reference lists the effect re-created after it: %+v", w)
	}

	// A run's own attempt, in a record kept past the run's reference by a
	// later attempt.
	id2 := e.business("refund", "o-"+rnd(4))
	runA, runB, runC := e.runID(), e.runID(), e.runID()
	notSent := func(context.Context, ledger.Call) ([]byte, error) { return nil, ledger.NotSent(errors.New("dns")) }
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id2, RunID: runA, NodeID: "a"}, notSent); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id2, RunID: runB, NodeID: "b"}, notSent); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	e.clock.Advance(ledger.MinRetention - time.Minute)
	mustDo(t, l, ledger.Effect{Identity: id2, RunID: runC, NodeID: "c"}, ok)
	e.clock.Advance(time.Hour) // runB's reference has expired; the record is kept
	if got := e.witness(l, runB, 3); got.Effects[1].NodeID != "b" {
		t.Fatalf("runB's witness: %+v", got.Effects)
	}
}

// A failing run-reference write stops the attempt before the claim changes
// hands: nothing fires and the record is untouched.
func testRunRefError(t *testing.T, e *env) {
	id := e.business("refund", "o-"+rnd(4))
	l := e.ledger()
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id, RunID: e.runID(), NodeID: "a"}, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	boom := errors.New("injected reference failure")
	e.store.setRefErr(boom)
	var calls atomic.Int64
	runB := e.runID()
	if _, err := l.Do(context.Background(), ledger.Effect{Identity: id, RunID: runB, NodeID: "b"}, e.charge(&calls)); !errors.Is(err, boom) || calls.Load() != 0 {
		t.Fatalf("Do with a failing reference: %v calls %d", err, calls.Load())
	}
	if rec := e.get(effectKey(id)); rec.Attempt != 1 || rec.State != ledger.StateReleased {
		t.Fatalf("record changed: attempt %d state %s", rec.Attempt, rec.State)
	}
	e.store.setRefErr(nil)
	r := mustDo(t, l, ledger.Effect{Identity: id, RunID: runB, NodeID: "b"}, e.charge(&calls))
	if r.Attempt != 2 || calls.Load() != 1 {
		t.Fatalf("%+v", r)
	}
	e.witness(l, runB, 2)
}

// 16 runs race on one business identity whose first attempt was released:
// one fires; every run that made an attempt (the winner) lists it.
func testRaceRunsWitnessed(t *testing.T, e *env) {
	id := e.business("refund", "o-"+rnd(4))
	runA := e.runID()
	if _, err := e.ledger().Do(context.Background(), ledger.Effect{Identity: id, RunID: runA, NodeID: "a"}, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	var calls atomic.Int64
	runs := make([]string, 16)
	res := make([]ledger.Result, 16)
	errs := make([]error, 16)
	start := make(chan struct{})
	finished := make(chan int, 16)
	for i := range runs {
		runs[i] = e.runID()
		l := e.ledger(func(c *ledger.Config) { c.Wait, c.PollInterval = 60*time.Second, 5*time.Millisecond })
		go func() {
			<-start
			res[i], errs[i] = l.Do(context.Background(), ledger.Effect{Identity: id, RunID: runs[i], NodeID: "n"}, e.charge(&calls))
			finished <- i
		}()
	}
	close(start)
	for range runs {
		recv(t, finished, "a racer")
	}
	winner := -1
	for i := range runs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if !res[i].Replayed {
			if winner >= 0 {
				t.Fatalf("runs %d and %d both fired", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 || calls.Load() != 1 || e.prov.Effects() != 1 {
		t.Fatalf("winner %d calls %d effects %d", winner, calls.Load(), e.prov.Effects())
	}
	l := e.ledger()
	e.witness(l, runs[winner], 2)
	e.witness(l, runA, 2)
}

// A value above MaxValueBytes is returned to the caller that ran the effect,
// not recorded; the success is, and a duplicate learns the value was dropped.
func testOversizedValue(t *testing.T, e *env) {
	l := e.ledger(func(c *ledger.Config) { c.MaxValueBytes = 8 })
	eff := e.effect()
	var calls atomic.Int64
	r := mustDo(t, l, eff, e.charge(&calls)) // "effect-1:charge": 15 bytes
	if len(r.Value) == 0 || r.ValueDropped {
		t.Fatalf("first %+v", r)
	}
	rec := e.get(effectKey(eff.Identity))
	if rec.Outcome == nil || !rec.Outcome.OK || !rec.Outcome.Dropped || rec.Outcome.Value != nil {
		t.Fatalf("outcome %+v", rec.Outcome)
	}
	d := mustDo(t, l, eff, e.charge(&calls))
	if !d.Replayed || !d.ValueDropped || d.Value != nil || calls.Load() != 1 {
		t.Fatalf("duplicate %+v calls %d", d, calls.Load())
	}
}

// skewedLedger is a reclaimer without a heartbeat whose clock runs d ahead
// of the env's.
func (e *env) skewedLedger(d time.Duration) *ledger.Ledger {
	return e.ledger(func(c *ledger.Config) {
		c.Heartbeat = -1
		c.Test.Clock = ClockFuncs{NowFunc: func() time.Time { return e.clock.Now().Add(d) }}
	})
}

// Leases are compared with the reclaimer's clock. A reclaimer whose clock is
// ahead by less than Lease-Heartbeat never takes a heartbeating claim; one
// ahead by more does, and then the owner's next renewal and its outcome are
// refused (the provider key is the same, so a deduplicating provider still
// performs one effect).
func testClockSkew(t *testing.T, e *env) {
	a, tk := e.heartbeating(5 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	skewed := e.skewedLedger
	started, done := e.fireUntilLost(a, eff, "late")
	fctx := recv(t, started, "the fire")
	within := skewed(20 * time.Second) // < Lease-Heartbeat = 25s
	for i := range 6 {
		e.clock.Advance(5 * time.Second)
		tk.Tick()
		if err := recv(t, renew, "a renewal"); err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		e.clock.Advance(4 * time.Second) // just before the next tick
		if _, err := within.Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, ledger.ErrInFlight) {
			t.Fatalf("executor 20s ahead, round %d: %v; want ErrInFlight", i, err)
		}
		e.clock.Advance(-4 * time.Second)
	}
	if fctx.Err() != nil {
		t.Fatal("owner cancelled")
	}
	// 31s ahead: beyond what a lease can absorb; it reclaims a live owner.
	r := mustDo(t, skewed(31*time.Second), eff, e.charge(nil))
	if r.Attempt != 2 {
		t.Fatalf("skewed reclaim %+v", r)
	}
	e.clock.Advance(5 * time.Second)
	tk.Tick()
	if err := recv(t, renew, "the refused renewal"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("owner's renewal after the skewed reclaim: %v", err)
	}
	if err := recv(t, done, "owner's Do"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("owner: %v; want ErrLeaseLost", err)
	}
	rec := e.get(key)
	if rec.Attempt != 2 || rec.Outcome == nil || bytes.Equal(rec.Outcome.Value, []byte("late")) {
		t.Fatalf("record %+v", rec)
	}
	if k := e.prov.Keys(); len(k) != 2 || k[0] != k[1] || e.prov.Effects() != 1 {
		t.Fatalf("provider keys %v effects %d", k, e.prov.Effects())
	}
}

// While renewals fail, the skew a lease absorbs is no longer Lease-Heartbeat:
// the owner's context lives until its heartbeat gives up, which is as late as
// the renewal margin before the lease written last ends (a stalled renewal),
// and here (a renewal that failed fast, the next tick still due before that
// end) until the next tick, 10 s before it. A reclaimer ahead by less than
// what is left sees the claim in flight; one ahead by 15 s, within
// Lease-Heartbeat (25 s), takes it while the owner's function still runs: two
// executors fire at once, under one provider key.
func testClockSkewWhileRenewalsFail(t *testing.T, e *env) {
	a, tk := e.heartbeating(10 * time.Second)
	renew := e.renewals()
	eff := e.effect()
	key := effectKey(eff.Identity)
	skewed := e.skewedLedger
	started, done, _ := e.fireUntilCut(a, eff, stopsWithCause)
	fctx := recv(t, started, "the fire")
	leaseEnd := e.get(key).LeaseUntil // the fire's: +30 s
	e.store.failRenewals(errors.New("injected store outage"))
	e.clock.Set(leaseEnd.Add(-20 * time.Second))
	tk.Tick()
	if err := recv(t, renew, "the failed renewal"); err == nil || errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("renewal: %v; want the injected outage", err)
	}
	e.clock.Set(leaseEnd.Add(-14 * time.Second)) // 4 s before the next tick
	if _, err := skewed(13*time.Second).Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("executor 13 s ahead: %v; want ErrInFlight", err)
	}
	r := mustDo(t, skewed(15*time.Second), eff, e.charge(nil))
	if r.Attempt != 2 || r.Replayed {
		t.Fatalf("executor 15 s ahead: %+v; want attempt 2 fired", r)
	}
	if fctx.Err() != nil {
		t.Fatal("the owner's function was cut before the skewed reclaim: the limit this test states no longer holds; update the documents")
	}
	e.clock.Set(leaseEnd.Add(-10 * time.Second))
	tk.Tick()
	recv(t, fctx.Done(), "the owner's cut")
	if err := recv(t, done, "owner's Do"); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("owner: %v; want ErrLeaseLost", err)
	}
	if k := e.prov.Keys(); len(k) != 2 || k[0] != k[1] {
		t.Fatalf("provider keys %v; want two calls under one key", k)
	}
}

// The writes Do makes on an attempt's behalf whatever its caller's context
// (the outcome of a function that returned, the release of a claim whose
// function was not called) are detached from that context and bounded by
// Config.OutcomeTimeout:
//   - cancelled caller: the caller's context ends while the effect function
//     runs, which then succeeds; the success is recorded (the effect ran)
//     and Do returns it;
//   - outcome write hangs: the store never answers the outcome write; the
//     write is given its own deadline (not the caller's, which had ended),
//     Do returns the store's error by then, and the attempt, left firing,
//     is reclaimed as escaped once its lease ends and fired with the same
//     provider key;
//   - release after the caller's context ended: the context ends between
//     the claim and the call; the claim is given back all the same;
//   - release hangs: a claim whose answer was lost is given back, and the
//     store never answers that release; Do returns the claim's error by
//     the release's deadline;
//   - a FireOnce slot's outcome write hangs: the same bound.
func testDetachedWrites(t *testing.T, e *env) {
	const timeout = 300 * time.Millisecond
	short := func(c *ledger.Config) { c.OutcomeTimeout = timeout }
	checkStall := func(t *testing.T, got stalledWrite, what string) {
		t.Helper()
		if !got.bounded || got.ended || got.given > timeout+100*time.Millisecond {
			t.Fatalf("the %s was given %s (a deadline: %v; its context already ended: %v); want its own deadline of %s, whatever the caller's context",
				what, got.given.Round(time.Millisecond), got.bounded, got.ended, timeout)
		}
	}
	t.Run("CancelledCaller", func(t *testing.T) {
		e := e.fresh(t)
		l := e.ledger(short)
		eff := e.effect()
		ctx, cancel := context.WithCancel(e.ctx())
		defer cancel()
		res, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
			cancel()
			return []byte("sent"), nil
		})
		if err != nil || string(res.Value) != "sent" {
			t.Fatalf("Do: %q, %v; want the success", res.Value, err)
		}
		if r := e.get(effectKey(eff.Identity)); r.State != ledger.StateCompleted || r.Outcome == nil || !r.Outcome.OK {
			t.Fatalf("record %s, outcome %+v; want completed, the success", r.State, r.Outcome)
		}
	})
	t.Run("OutcomeWriteHangs", func(t *testing.T) {
		e := e.fresh(t)
		l := e.ledger(short)
		eff := e.effect()
		key := effectKey(eff.Identity)
		stalls := e.store.stallWrites(func(n *ledger.Record, w ledger.Expect) bool {
			return w.State == ledger.StateFiring && n.State != ledger.StateFiring
		})
		ctx, cancel := context.WithCancel(e.ctx())
		defer cancel()
		done := make(chan error, 1)
		start := clock.Wall()
		go func() {
			_, err := l.Do(ctx, eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
				if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
					return nil, err
				}
				cancel() // the caller's context ends while the function runs
				return []byte("charged"), nil
			})
			done <- err
		}()
		checkStall(t, recv(t, stalls, "the outcome write"), "outcome write")
		err := recv(t, done, "Do")
		if took := clock.Wall().Sub(start); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ledger.ErrOutcomeNotRecorded) || took > timeout+2*time.Second {
			t.Fatalf("Do returned after %s: %v; want the outcome write's deadline error (ErrOutcomeNotRecorded) within about %s", took.Round(time.Millisecond), err, timeout)
		}
		r := e.get(key)
		if r.State != ledger.StateFiring || r.Outcome != nil {
			t.Fatalf("record %s, outcome %+v; want firing, none (the outcome was not written)", r.State, r.Outcome)
		}
		e.store.stallWrites(nil)
		e.clock.Set(r.LeaseUntil)
		var calls atomic.Int64
		if _, err := l.Do(e.ctx(), eff, e.charge(&calls)); err != nil || calls.Load() != 1 {
			t.Fatalf("after the lease: %v, %d calls; want the reclaim to fire once", err, calls.Load())
		}
		if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
			t.Fatalf("attempts %v; want escaped, completed", got)
		}
		if keys := e.prov.Keys(); len(keys) != 2 || keys[0] != keys[1] {
			t.Fatalf("provider keys %v; want two calls under one key", keys)
		}
	})
	t.Run("ReleaseAfterTheCallerEnded", func(t *testing.T) {
		e := e.fresh(t)
		l := e.ledger(short)
		eff := e.effect()
		ctx, cancel := context.WithCancel(e.ctx())
		defer cancel()
		e.store.onCreate(func(_ *ledger.Record, won bool, _ error) error {
			if won {
				cancel() // between the claim and the call
			}
			return nil
		})
		var calls atomic.Int64
		if _, err := l.Do(ctx, eff, e.charge(&calls)); !errors.Is(err, context.Canceled) || calls.Load() != 0 {
			t.Fatalf("Do: %v, %d calls; want the caller's cancellation, no call", err, calls.Load())
		}
		if got := e.attemptStates(effectKey(eff.Identity)); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased}) {
			t.Fatalf("attempts %v; want the claim given back (released)", got)
		}
	})
	t.Run("ReleaseHangs", func(t *testing.T) {
		e := e.fresh(t)
		l := e.ledger(short)
		eff := e.effect()
		lost := errors.New("injected lost answer")
		e.store.onCreate(func(_ *ledger.Record, won bool, _ error) error {
			if won {
				return lost // the claim landed, its answer did not
			}
			return nil
		})
		stalls := e.store.stallWrites(func(n *ledger.Record, _ ledger.Expect) bool { return n.State == ledger.StateReleased })
		done := make(chan error, 1)
		start := clock.Wall()
		var calls atomic.Int64
		go func() {
			_, err := l.Do(e.ctx(), eff, e.charge(&calls))
			done <- err
		}()
		checkStall(t, recv(t, stalls, "the release"), "release")
		err := recv(t, done, "Do")
		if took := clock.Wall().Sub(start); !errors.Is(err, lost) || took > timeout+2*time.Second || calls.Load() != 0 {
			t.Fatalf("Do returned after %s: %v, %d calls; want the claim's error within about %s, no call", took.Round(time.Millisecond), err, calls.Load(), timeout)
		}
	})
	t.Run("SlotOutcomeWriteHangs", func(t *testing.T) {
		e := e.fresh(t)
		l := e.ledger(short)
		stalls := e.store.stallWrites(func(n *ledger.Record, w ledger.Expect) bool {
			return w.State == ledger.StateClaimed && n.State == ledger.StateCompleted
		})
		ctx, cancel := context.WithCancel(e.ctx())
		defer cancel()
		done := make(chan error, 1)
		start := clock.Wall()
		go func() {
			_, err := l.FireOnce(ctx, identity.Slot{Job: "job-" + rnd(4), Slot: "1"}, func(context.Context) error {
				cancel()
				return nil
			})
			done <- err
		}()
		checkStall(t, recv(t, stalls, "the slot's outcome write"), "slot's outcome write")
		if err := recv(t, done, "FireOnce"); !errors.Is(err, context.DeadlineExceeded) || clock.Wall().Sub(start) > timeout+2*time.Second {
			t.Fatalf("FireOnce: %v; want the outcome write's deadline error within about %s", err, timeout)
		}
	})
}

// A lease ends at the instant it names, alike for the executor's decision
// and the store's condition (LeaseUntil <= now is ended, at the
// millisecond the record holds): a millisecond before it a second
// executor sees the attempt in flight and fires nothing; at it, the second
// executor reclaims it (escaped) and fires under the same provider key,
// and the first one's late outcome is refused (ErrLeaseLost) without
// touching the second's. An owner whose outcome comes at that instant,
// before anyone reclaimed, records it: the second executor replays it.
func testLeaseEndsAtItsInstant(t *testing.T, e *env) {
	noHeartbeat := func(c *ledger.Config) { c.Heartbeat = -1 }
	for _, reclaimFirst := range []bool{true, false} {
		e := e.fresh(t)
		a, b := e.ledger(noHeartbeat), e.ledger(noHeartbeat)
		eff := e.effect()
		key := effectKey(eff.Identity)
		started, release := make(chan struct{}, 1), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := a.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
				if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
					return nil, err
				}
				started <- struct{}{}
				<-release
				return []byte("first"), nil
			})
			done <- err
		}()
		recv(t, started, "the first fire")
		lease := e.get(key).LeaseUntil
		var calls atomic.Int64
		e.clock.Set(lease.Add(-time.Millisecond))
		if _, err := b.Do(context.Background(), eff, e.charge(&calls)); !errors.Is(err, ledger.ErrInFlight) || calls.Load() != 0 {
			t.Fatalf("a millisecond before the lease ends: %v, %d calls; want in flight, none", err, calls.Load())
		}
		e.clock.Set(lease)
		if !reclaimFirst {
			close(release)
			if err := recv(t, done, "the owner's Do"); err != nil {
				t.Fatalf("the owner's outcome at its lease's end, unreclaimed: %v", err)
			}
			r, err := b.Do(context.Background(), eff, e.charge(&calls))
			if err != nil || !r.Replayed || string(r.Value) != "first" || calls.Load() != 0 {
				t.Fatalf("after the owner's outcome: %+v %v, %d calls; want its replay", r, err, calls.Load())
			}
			continue
		}
		r, err := b.Do(context.Background(), eff, e.charge(&calls))
		if err != nil || r.Replayed || r.Attempt != 2 || calls.Load() != 1 {
			t.Fatalf("at the lease's end: %+v %v, %d calls; want attempt 2 fired", r, err, calls.Load())
		}
		close(release)
		if err := recv(t, done, "the owner's Do"); !errors.Is(err, ledger.ErrLeaseLost) {
			t.Fatalf("the owner's late outcome: %v; want ErrLeaseLost", err)
		}
		rec := e.get(key)
		if rec.State != ledger.StateCompleted || rec.Outcome == nil || string(rec.Outcome.Value) == "first" {
			t.Fatalf("record %s %+v; want the second executor's outcome", rec.State, rec.Outcome)
		}
		if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
			t.Fatalf("attempts %v; want escaped, completed", got)
		}
		if k := e.prov.Keys(); len(k) != 2 || k[0] != k[1] || e.prov.Effects() != 1 {
			t.Fatalf("provider keys %v, effects %d; want two calls under one key, one effect", k, e.prov.Effects())
		}
	}
}
