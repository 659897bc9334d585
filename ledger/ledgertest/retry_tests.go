package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

var retryTests = []test{
	{"RetryAfterHonouredDurably", testRetryAfterHonoured},
	{"BackoffCapAndBudget", testBackoffCapAndBudget},
	{"ResolveEscaped", testResolveEscaped},
	{"UnknownEffectNotFound", testUnknownEffectNotFound},
}

// busy is an effect function that sends to the fake provider and then
// reports what a provider answering 429 with Retry-After would: the request
// reached it (escaped), retry no earlier than after.
func (e *env) busy(after time.Duration) ledger.Func {
	return func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
			return nil, err
		}
		return nil, ledger.RetryAt(ledger.Uncertain(errors.New("provider answered 429")), e.clock.Now().Add(after))
	}
}

func noJitter(d time.Duration) time.Duration { return d }

// A provider asking for 30 s is retried no earlier than 30 s later, and the
// schedule lives in the record: any executor (a fresh Ledger, as after a
// crash) calling before then fires nothing and learns the time.
func testRetryAfterHonoured(t *testing.T, e *env) {
	l := e.ledger(func(c *ledger.Config) { c.Test.Jitter = noJitter })
	eff := e.effect()
	eff.Retry = &ledger.Retry{MaxAttempts: 5, Budget: 15 * time.Minute}
	t0 := e.clock.Now().UTC().Truncate(time.Millisecond)
	_, err := l.Do(context.Background(), eff, e.busy(30*time.Second))
	var rl *ledger.RetryLaterError
	if !errors.As(err, &rl) || !errors.Is(err, ledger.ErrRetryLater) || !errors.Is(err, ledger.ErrUncertain) {
		t.Fatalf("Do: %v; want *RetryLaterError wrapping the uncertain attempt", err)
	}
	if rl.At.Sub(t0) < 30*time.Second || rl.Attempt != 1 || rl.MaxAttempts != 5 || !rl.Deadline.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("scheduled %+v; want >= 30 s after %s, attempt 1 of 5, deadline +15m", rl, t0)
	}
	// A restarted executor 29 s later: nothing fires, one round trip.
	e.clock.Advance(29 * time.Second)
	e.resetRT()
	_, err = e.ledger().Do(context.Background(), eff, e.charge(nil))
	if !errors.As(err, &rl) || errors.Is(err, ledger.ErrUncertain) || e.prov.Requests() != 1 {
		t.Fatalf("early Do: %v, provider requests %d; want *RetryLaterError and no send", err, e.prov.Requests())
	}
	e.checkRT("early Do", 1, 2)
	// The witness shows attempt 1 of 5 and the next attempt time.
	p, err := l.Witness(context.Background(), eff.RunID)
	if err != nil {
		t.Fatal(err)
	}
	ValidateProjection(t, p)
	if len(p.Effects) != 1 || p.Effects[0].MaxAttempts != 5 || !p.Effects[0].NextAttemptAt.Equal(rl.At) || !p.Effects[0].Fired {
		t.Fatalf("witness %+v; want attempt 1 of 5, next at %s", p.Effects, rl.At)
	}
	e.clock.Advance(time.Second)
	r := mustDo(t, e.ledger(), eff, e.charge(nil))
	if r.Attempt != 2 || e.prov.Requests() != 2 || !slices.Equal(e.prov.Keys()[:1], e.prov.Keys()[1:]) {
		t.Fatalf("on time: %+v, requests %d keys %v", r, e.prov.Requests(), e.prov.Keys())
	}
}

// Without Retry-After: exponential backoff (jitter injected away); the
// attempt cap and the time budget both end the retries with
// *AttemptsExhaustedError, and the last attempt stays escaped.
func testBackoffCapAndBudget(t *testing.T, e *env) {
	l := e.ledger(func(c *ledger.Config) { c.Test.Jitter = noJitter })
	fail := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		_, _ = e.prov.Call(ctx, c.ProviderKey, "charge")
		return nil, ledger.Uncertain(errors.New("503"))
	}
	eff := e.effect()
	eff.Retry = &ledger.Retry{MaxAttempts: 3, Base: 2 * time.Second, Max: time.Hour}
	var gaps []time.Duration
	for i := 0; i < 3; i++ {
		now := e.clock.Now().UTC().Truncate(time.Millisecond)
		_, err := l.Do(context.Background(), eff, fail)
		var rl *ledger.RetryLaterError
		if i < 2 {
			if !errors.As(err, &rl) {
				t.Fatalf("attempt %d: %v", i+1, err)
			}
			gaps = append(gaps, rl.At.Sub(now))
			e.clock.Set(rl.At)
			continue
		}
		var ex *ledger.AttemptsExhaustedError
		if !errors.As(err, &ex) || ex.Budget || ex.Attempts != 3 || ex.MaxAttempts != 3 || !ex.Escaped {
			t.Fatalf("attempt 3: %v; want the attempt cap exhausted", err)
		}
	}
	if !slices.Equal(gaps, []time.Duration{2 * time.Second, 4 * time.Second}) {
		t.Fatalf("backoff %v; want [2s 4s]", gaps)
	}
	if _, err := l.Do(context.Background(), eff, fail); !errors.Is(err, ledger.ErrAttemptsExhausted) || e.prov.Requests() != 3 {
		t.Fatalf("after the cap: %v, %d requests", err, e.prov.Requests())
	}

	// Budget: 10 s with a 8 s backoff leaves room for 2 attempts.
	eff2 := e.effect()
	eff2.Retry = &ledger.Retry{MaxAttempts: 10, Budget: 10 * time.Second, Base: 8 * time.Second}
	_, err := l.Do(context.Background(), eff2, fail)
	var rl *ledger.RetryLaterError
	if !errors.As(err, &rl) {
		t.Fatalf("budget attempt 1: %v", err)
	}
	e.clock.Set(rl.At)
	_, err = l.Do(context.Background(), eff2, fail)
	var ex *ledger.AttemptsExhaustedError
	if !errors.As(err, &ex) || !ex.Budget || ex.Attempts != 2 {
		t.Fatalf("budget attempt 2: %v; want the time budget exhausted", err)
	}
	v, err := l.ShowEffect(context.Background(), eff2.Identity.EffectID)
	if err != nil || v.State != ledger.EffectEscaped || !v.Exhausted || !v.NextAttemptAt.IsZero() {
		t.Fatalf("view %+v %v; want escaped, exhausted, nothing scheduled", v, err)
	}
}

// An operator settles escaped effects: listed, shown, resolved fenced on
// what was shown, recorded as a row with the operator, in the witness.
func testResolveEscaped(t *testing.T, e *env) {
	l := e.ledger()
	ctx := context.Background()
	run := e.runID()
	crash := func(eff ledger.Effect) {
		e.store.failOnce(ledger.StateCompleted, errCrash)
		if _, err := l.Do(ctx, eff, e.charge(nil)); !errors.Is(err, errCrash) {
			t.Fatalf("crashed Do: %v", err)
		}
	}
	a, b, c := e.effect(), e.effect(), e.effect()
	a.RunID, b.RunID, c.RunID = run, run, run
	crash(a)
	crash(b)
	mustDo(t, l, c, e.charge(nil))
	// While the lease is live they are in flight, not escaped.
	if vs, err := l.ListEffects(ctx, ledger.Filter{State: ledger.EffectEscaped, RunID: run}); err != nil || len(vs) != 0 {
		t.Fatalf("escaped during the lease: %+v %v", vs, err)
	}
	e.clock.Advance(31 * time.Second)
	vs, err := l.ListEffects(ctx, ledger.Filter{State: ledger.EffectEscaped, RunID: run})
	if err != nil || len(vs) != 2 {
		t.Fatalf("escaped: %+v %v; want 2", vs, err)
	}
	if all, err := l.ListEffects(ctx, ledger.Filter{State: ledger.EffectEscaped}); !errors.Is(err, ledger.ErrNoScan) {
		found := 0
		for _, v := range all {
			if v.EffectID == a.Identity.EffectID || v.EffectID == b.Identity.EffectID {
				found++
			}
		}
		if err != nil || found != 2 {
			t.Fatalf("store-wide listing: %d of 2 found, %v", found, err)
		}
	}
	va, err := l.ShowEffect(ctx, a.Identity.EffectID)
	if err != nil || va.State != ledger.EffectEscaped || va.Rev == "" {
		t.Fatalf("show: %+v %v", va, err)
	}
	// Refused: no operator, bad settlement, stale rev, not escaped.
	if _, err := l.Resolve(ctx, a.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Rev: va.Rev}); err == nil {
		t.Fatal("resolution without an operator accepted")
	}
	if _, err := l.Resolve(ctx, a.Identity.EffectID, ledger.Resolution{As: "maybe", Operator: "ops@acme", Rev: va.Rev}); err == nil {
		t.Fatal("unknown settlement accepted")
	}
	if _, err := l.Resolve(ctx, c.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops@acme", Rev: "x"}); !errors.Is(err, ledger.ErrChanged) {
		t.Fatalf("stale rev: %v", err)
	}
	vc, _ := l.ShowEffect(ctx, c.Identity.EffectID)
	if _, err := l.Resolve(ctx, c.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops@acme", Rev: vc.Rev}); !errors.Is(err, ledger.ErrNotEscaped) {
		t.Fatalf("completed effect resolved: %v", err)
	}
	// The effect changes between show and resolve (an executor reclaims
	// it): the resolution is refused.
	vb, _ := l.ShowEffect(ctx, b.Identity.EffectID)
	mustDo(t, e.ledger(), b, e.charge(nil))
	if _, err := l.Resolve(ctx, b.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops@acme", Rev: vb.Rev}); !errors.Is(err, ledger.ErrChanged) {
		t.Fatalf("resolution after a change: %v; want ErrChanged", err)
	}
	// delivered: completed, later Do replays, nothing fires.
	before := e.prov.Requests()
	got, err := l.Resolve(ctx, a.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops@acme", Note: "seen in the provider console", Rev: va.Rev})
	if err != nil || got.State != ledger.EffectCompleted {
		t.Fatalf("resolve delivered: %+v %v", got, err)
	}
	last := got.Attempts[len(got.Attempts)-1]
	if last.Operator != "ops@acme" || last.Note != "seen in the provider console" || last.Fired || last.State != ledger.AttemptCompleted {
		t.Fatalf("resolution row %+v", last)
	}
	if r, err := l.Do(ctx, a, e.charge(nil)); err != nil || !r.Replayed || e.prov.Requests() != before {
		t.Fatalf("Do after delivered: %+v %v", r, err)
	}

	// not-delivered: the next Do fires with the same provider key, even
	// past the attempt cap.
	d := e.effect()
	d.RunID = run
	d.Retry = &ledger.Retry{MaxAttempts: 1}
	fail := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		_, _ = e.prov.Call(ctx, c.ProviderKey, "charge")
		return nil, ledger.Uncertain(errors.New("timeout"))
	}
	if _, err := l.Do(ctx, d, fail); !errors.Is(err, ledger.ErrAttemptsExhausted) {
		t.Fatalf("capped: %v", err)
	}
	vd, _ := l.ShowEffect(ctx, d.Identity.EffectID)
	if vd.State != ledger.EffectEscaped || !vd.Exhausted {
		t.Fatalf("view %+v", vd)
	}
	if _, err := l.Resolve(ctx, d.Identity.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops@acme", Rev: vd.Rev}); err != nil {
		t.Fatal(err)
	}
	r := mustDo(t, l, d, e.charge(nil))
	keys := e.prov.Keys()
	if r.Replayed || keys[len(keys)-1] != keys[len(keys)-2] || keys[len(keys)-1] != d.Identity.ProviderKey {
		t.Fatalf("after not-delivered: %+v keys %v", r, keys)
	}
	p, err := l.Witness(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	ValidateProjection(t, p)
	fired, ops := 0, 0
	for _, w := range p.Effects {
		if w.Fired && !w.FiredAt.IsZero() {
			fired++
		}
		if w.Operator != "" {
			ops++
		}
	}
	if fired != e.prov.Requests() || ops != 2 {
		t.Fatalf("witness: %d fired rows for %d requests, %d operator rows; %s", fired, e.prov.Requests(), ops, fmt.Sprint(p.Effects))
	}
}

// testUnknownEffectNotFound: showing or resolving an effect no record
// holds is ErrEffectNotFound, and resolving it writes nothing.
func testUnknownEffectNotFound(t *testing.T, e *env) {
	l := e.ledger()
	id := e.effect().Identity.EffectID
	if _, err := l.ShowEffect(context.Background(), id); !errors.Is(err, ledger.ErrEffectNotFound) {
		t.Fatalf("ShowEffect of an unknown effect: %v, want ErrEffectNotFound", err)
	}
	res := ledger.Resolution{As: ledger.Delivered, Operator: "ops@example.com", Rev: "1"}
	if _, err := l.Resolve(context.Background(), id, res); !errors.Is(err, ledger.ErrEffectNotFound) {
		t.Fatalf("Resolve of an unknown effect: %v, want ErrEffectNotFound", err)
	}
	// A refused note says why: its length or a control character.
	for note, why := range map[string]string{strings.Repeat("n", 513): "512 bytes", "ok\x1b[31m": "control character"} {
		bad := res
		bad.Note = note
		if _, err := l.Resolve(context.Background(), id, bad); err == nil || !strings.Contains(err.Error(), why) {
			t.Fatalf("Resolve with a note %q: %v, want it refused naming %q", note[:min(len(note), 12)], err, why)
		}
	}
	if _, err := l.ShowEffect(context.Background(), id); !errors.Is(err, ledger.ErrEffectNotFound) {
		t.Fatalf("after the refused Resolve: %v, want ErrEffectNotFound still", err)
	}
}
