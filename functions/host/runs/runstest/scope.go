package runstest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// scoped returns a new pending run of tenant at d (not yet created).
func (e *env) scopedRun(tenant string, d time.Duration) runs.Run {
	return runs.NewRun(tenant, "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), e.at(d))
}

// mustHold creates r holding scope.
func (e *env) mustHold(t *testing.T, r runs.Run, scope string) {
	t.Helper()
	if err := e.st.CreateScoped(e.ctx, r, scope); err != nil {
		t.Fatalf("create %s in scope %q: %v", r.ID, scope, err)
	}
}

// mustRefuse requires a create of r in scope to be refused with holder,
// and nothing written for r.
func (e *env) mustRefuse(t *testing.T, r runs.Run, scope, holder string) {
	t.Helper()
	err := e.st.CreateScoped(e.ctx, r, scope)
	var held *runs.ScopeHeldError
	if !errors.Is(err, runs.ErrScopeHeld) || !errors.As(err, &held) || held.Holder != holder {
		t.Fatalf("create in a held scope: %v, want ErrScopeHeld held by %s", err, holder)
	}
	if _, err := e.st.Get(e.ctx, r.ID); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("a refused create wrote its run: %v", err)
	}
}

// scopeAcquire: a free scope is taken, the run reads back as Create
// writes it; the same create again is ErrRunExists (the scope is its own).
func scopeAcquire(t *testing.T, e *env) {
	r := e.scopedRun("acme", 0)
	e.mustHold(t, r, "order-1")
	if got := e.get(t, r.ID); got.Status != runs.StatusPending || got.Version != 1 {
		t.Fatalf("scoped run reads back as %+v", got)
	}
	if err := e.st.CreateScoped(e.ctx, r, "order-1"); !errors.Is(err, runs.ErrRunExists) {
		t.Fatalf("the holder's create again: %v, want ErrRunExists", err)
	}
	// Another scope of the tenant is independent.
	e.mustHold(t, e.scopedRun("acme", 0), "order-2")
}

// scopeRefusedWhileLive: a pending, then running, then parked holder
// refuses every other create of its scope.
func scopeRefusedWhileLive(t *testing.T, e *env) {
	h := e.scopedRun("acme", 0)
	e.mustHold(t, h, "s")
	e.mustRefuse(t, e.scopedRun("acme", time.Second), "s", h.ID)
	if _, err := e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	e.mustRefuse(t, e.scopedRun("acme", 2*time.Second), "s", h.ID)
	if err := e.st.Schedule(e.ctx, h.ID, runs.Wake{At: e.at(time.Hour), Attempt: 1, MaxAttempts: 3}, e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.mustRefuse(t, e.scopedRun("acme", ScopeLater), "s", h.ID)
}

// ScopeLater is past runs.ScopeHoldGrace from the suite's origin.
const ScopeLater = runs.ScopeHoldGrace + time.Hour

// scopeTakeOver: once the holder ended (completed, failed, cancelled,
// failed by a breached cap) the next create takes the scope over and holds
// it in turn.
func scopeTakeOver(t *testing.T, e *env) {
	for _, end := range []string{"completed", "failed", "cancelled", "timeout"} {
		t.Run(end, func(t *testing.T) {
			scope := "s-" + end
			h := e.scopedRun("acme", 0)
			e.mustHold(t, h, scope)
			var err error
			switch end {
			case "timeout":
				_, err = e.st.Breach(e.ctx, h.ID, e.breachEv(time.Second), "run_timeout", "timed out", e.at(time.Second))
			case "cancelled":
				_, err = e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", e.at(time.Second))
			default:
				_, err = e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(time.Second))
				if err == nil {
					_, err = e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusRunning}, runs.Status(end), "", e.at(time.Second))
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			next := e.scopedRun("acme", 2*time.Second)
			e.mustHold(t, next, scope)
			e.mustRefuse(t, e.scopedRun("acme", 3*time.Second), scope, next.ID)
		})
	}
}

// scopeRace: of racing creates of distinct runs in one free scope exactly
// one creates its run; every other is ErrScopeHeld naming it.
func scopeRace(t *testing.T, e *env) {
	rs := make([]runs.Run, e.racers)
	for i := range rs {
		rs[i] = e.scopedRun("acme", 0)
	}
	errs := e.race(func(i int) error { return e.st.CreateScoped(e.ctx, rs[i], "contended") })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("two creates of one scope won: %s and %s", rs[winner].ID, rs[i].ID)
		case err == nil:
			winner = i
		case !errors.Is(err, runs.ErrScopeHeld):
			t.Fatalf("racer %d: %v, want nil or ErrScopeHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no create of the scope won")
	}
	for i, r := range rs {
		_, err := e.st.Get(e.ctx, r.ID)
		if (i == winner) != (err == nil) {
			t.Fatalf("run %d (winner %d): get %v", i, winner, err)
		}
	}
	e.mustRefuse(t, e.scopedRun("acme", time.Second), "contended", rs[winner].ID)
}

// scopeTenants: two tenants' runs in the same scopeId are independent.
func scopeTenants(t *testing.T, e *env) {
	a, b := e.scopedRun("acme", 0), e.scopedRun("globex", 0)
	e.mustHold(t, a, "shared")
	e.mustHold(t, b, "shared")
	e.mustRefuse(t, e.scopedRun("globex", time.Second), "shared", b.ID)
	e.mustRefuse(t, e.scopedRun("acme", time.Second), "shared", a.ID)
}

// scopeBad: an empty, over-long or non-UTF-8 scopeId is ErrBadScope and
// writes nothing.
func scopeBad(t *testing.T, e *env) {
	for _, s := range []string{"", strings.Repeat("x", runs.MaxScopeIDBytes+1), "\xff"} {
		r := e.scopedRun("acme", 0)
		if err := e.st.CreateScoped(e.ctx, r, s); !errors.Is(err, runs.ErrBadScope) {
			t.Fatalf("scopeId %q: %v, want ErrBadScope", s, err)
		}
		if _, err := e.st.Get(e.ctx, r.ID); !errors.Is(err, runs.ErrRunNotFound) {
			t.Fatalf("a refused scope wrote its run: %v", err)
		}
	}
	e.mustHold(t, e.scopedRun("acme", 0), strings.Repeat("é", runs.MaxScopeIDBytes/2))
}

// scopeLostAnswer: the scope write applies and its answer is lost (the
// SDK retries it): the create still succeeds once, and holds the scope.
func scopeLostAnswer(t *testing.T, e *env) {
	r := e.scopedRun("acme", 0)
	e.lose("PutItem")
	if err := e.st.CreateScoped(e.ctx, r, "lossy"); err != nil && !errors.Is(err, runs.ErrRunExists) {
		t.Fatalf("create after a lost answer: %v", err)
	}
	if err := e.st.CreateScoped(e.ctx, r, "lossy"); !errors.Is(err, runs.ErrRunExists) {
		t.Fatalf("retry: %v, want ErrRunExists", err)
	}
	e.get(t, r.ID)
	e.mustRefuse(t, e.scopedRun("acme", time.Second), "lossy", r.ID)
}

// scopeTakeOverRace: of racing creates of one scope whose holder has
// ended, exactly one takes it over; every other is ErrScopeHeld and
// writes no run.
func scopeTakeOverRace(t *testing.T, e *env) {
	h := e.scopedRun("acme", 0)
	e.mustHold(t, h, "ended")
	if _, err := e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	rs := make([]runs.Run, e.racers)
	for i := range rs {
		rs[i] = e.scopedRun("acme", 2*time.Second)
	}
	errs := e.race(func(i int) error { return e.st.CreateScoped(e.ctx, rs[i], "ended") })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("two takeovers of one scope won: %s and %s", rs[winner].ID, rs[i].ID)
		case err == nil:
			winner = i
		case !errors.Is(err, runs.ErrScopeHeld):
			t.Fatalf("racer %d: %v, want nil or ErrScopeHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no takeover of the ended holder's scope won")
	}
	for i, r := range rs {
		_, err := e.st.Get(e.ctx, r.ID)
		if (i == winner) != (err == nil) {
			t.Fatalf("run %d (winner %d): get %v", i, winner, err)
		}
	}
	e.mustRefuse(t, e.scopedRun("acme", 3*time.Second), "ended", rs[winner].ID)
}
