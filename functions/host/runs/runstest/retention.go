package runstest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// retention is the retention the retention cases give their store
// (Harness.NewRetaining): 30 days.
const retention = 30 * 24 * time.Hour

// retentionCases run over a store with a retention, only when the harness
// can build one (Harness.NewRetaining).
var retentionCases = []testCase{
	{"Retention/EndsStamped", retentionEndsStamped},
	{"Retention/LiveNever", retentionLiveNever},
	{"Retention/CreateCarriesNone", retentionCreateCarriesNone},
	{"Retention/Race", retentionRace},
	{"Retention/LostAnswer", retentionLostAnswer},
	{"Retention/ScopeOfAnExpiredHolder", retentionScopeOfAnExpiredHolder},
	{"Retention/ExpiredBeforeItsDeletion", retentionExpiredBeforeItsDeletion},
	{retentionOneWriteCase, retentionOneWrite},
}

// retentionOneWriteCase is run only with a backend counter
// (Harness.RoundTrips).
const retentionOneWriteCase = "Retention/OneWrite"

// wantExpiry is when a run that ended at end expires: end + retention, in
// whole seconds.
func wantExpiry(end time.Time) time.Time {
	return time.Unix(end.Add(retention).Unix(), 0).UTC()
}

// checkExpiry fails unless the run as returned, as read back and (when the
// harness can read it) as stored carries the expiry of an end at end, or
// none when end is zero.
func (e *env) checkExpiry(t *testing.T, what string, got runs.Run, end time.Time) {
	t.Helper()
	want := time.Time{}
	if !end.IsZero() {
		want = wantExpiry(end)
	}
	if !got.ExpiresAt.Equal(want) {
		t.Errorf("%s: the write returned expiresAt %v, want %v", what, got.ExpiresAt, want)
	}
	if read := e.get(t, got.ID); !read.ExpiresAt.Equal(want) {
		t.Errorf("%s: reads back with expiresAt %v, want %v", what, read.ExpiresAt, want)
	}
	if e.rawExpiry == nil {
		return
	}
	sec, ok := e.rawExpiry(t, e.st, got.ID)
	switch {
	case want.IsZero() && ok:
		t.Errorf("%s: the stored item carries expiresAt %d, want none", what, sec)
	case !want.IsZero() && (!ok || sec != want.Unix()):
		t.Errorf("%s: the stored item's expiresAt is %d (present %v), want %d epoch seconds", what, sec, ok, want.Unix())
	}
}

// retentionEndsStamped: every way a run ends (completed, failed, cancelled
// with or without a cancelling request, an execution's Finish, a breached
// cap, from pending or from a parked running run) stamps its expiry, end +
// retention, in the write that ends it.
func retentionEndsStamped(t *testing.T, e *env) {
	end := e.at(7*time.Second + 300*time.Millisecond)
	r := e.running(t, 0)
	got, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", end)
	if err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "completed", got, end)

	r = e.running(t, 0)
	got, err = e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusFailed, "boom", end)
	if err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "failed by its execution", got, end)

	r = e.running(t, 0)
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.now); err != nil {
		t.Fatal(err)
	}
	got, err = e.st.Transition(e.ctx, r.ID, live, runs.StatusFailed, "boom", end)
	if err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "failed while parked", got, end)

	got, err = e.st.Cancel(e.ctx, e.newRun(t, 0).ID, live, "rec-1", "the order was withdrawn", end)
	if err != nil {
		t.Fatal(err)
	}
	if got.CancelledBy != "rec-1" || got.CancelReason != "the order was withdrawn" {
		t.Fatalf("cancelled by %q for %q, want rec-1 for its reason", got.CancelledBy, got.CancelReason)
	}
	if read, err := e.st.Get(e.ctx, got.ID); err != nil || read.CancelReason != got.CancelReason {
		t.Fatalf("the cancel's reason read back: %q, %v", read.CancelReason, err)
	}
	e.checkExpiry(t, "cancelled by a keyed request", got, end)

	got, err = e.st.Transition(e.ctx, e.newRun(t, 0).ID, live, runs.StatusCancelled, "", end)
	if err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "cancelled", got, end)

	got, err = e.st.Breach(e.ctx, e.running(t, 0).ID, e.breachEv(time.Second), "run_timeout", "timeout", end)
	if err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "failed on a breached cap", got, end)
	// No ended run, stamped for expiry, is due or stale: the stale-run pass
	// and the parked-run schedule never see one as live.
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("ended runs are due: %v %v", ids, err)
	}
	if ids, err := e.st.Stale(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("ended runs are listed stale: %v %v", ids, err)
	}

	// A refused end (the run had ended) moves nothing, the expiry included.
	cur, err := e.st.Transition(e.ctx, got.ID, live, runs.StatusCancelled, "", e.at(time.Hour))
	if !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("cancel of an ended run: %v", err)
	}
	e.checkExpiry(t, "an ended run refused a second end", cur, end)
}

// retentionLiveNever: a live run (pending, running, parked, taken by a
// claim, adopted, renewed, with failures noted, its log appended) never
// carries an expiry, whatever the store's retention.
func retentionLiveNever(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	e.checkExpiry(t, "pending", e.get(t, r.ID), time.Time{})
	got, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.now)
	if err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "running", got, time.Time{})
	if got, err = e.st.AppendLog(e.ctx, r.ID, got.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}, e.now); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "log appended", got, time.Time{})
	if _, err := e.st.NoteFailure(e.ctx, r.ID, "transient", e.now); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "failure noted", e.get(t, r.ID), time.Time{})
	if got, err = e.st.Renew(e.ctx, r.ID, got.Epoch, e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "renewed", got, time.Time{})
	if got, err = e.st.Claim(e.ctx, r.ID, e.at(time.Second), e.at(2*window)); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "claimed", got, time.Time{})
	if got, err = e.st.Adopt(e.ctx, r.ID, e.at(3*window)); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "adopted", got, time.Time{})
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Hour), Attempt: 1, MaxAttempts: 3}, e.at(3*window)); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "parked", e.get(t, r.ID), time.Time{})
	adopted, err := e.st.Adopt(e.ctx, r.ID, e.at(3*window))
	if err != nil {
		t.Fatal(err)
	}
	if got, err = e.st.Park(e.ctx, r.ID, adopted.Epoch, runs.Wake{At: e.at(time.Hour), Attempt: 2, MaxAttempts: 3}, e.at(3*window)); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "parked by its execution", got, time.Time{})
	// Parked, it is Due's (not Stale's: RED_TEAM 485); resumed, Stale's.
	if !e.due(t, e.at(time.Hour), r.ID) {
		t.Fatal("a parked run of a store with a retention is not listed due")
	}
	if got, err = e.st.Resume(e.ctx, r.ID, e.at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	e.checkExpiry(t, "resumed", got, time.Time{})
	if !e.stale(t, e.at(2*time.Hour), r.ID) {
		t.Fatal("a live run of a store with a retention is not listed stale")
	}
}

// retentionRace: racing writers end one running run (completions,
// failures, cancels, breaches, each at its own time) while others keep it
// live (adoptions, noted failures): exactly one end wins, and the stored
// expiry is the winner's end + retention; a run the racers leave live
// carries none.
func retentionRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	ends := make([]runs.Run, e.racers)
	errs := e.race(func(i int) error {
		at := e.at(time.Duration(i+1) * time.Second)
		var err error
		switch i % 6 {
		case 0:
			ends[i], err = e.st.Transition(e.ctx, r.ID, live, runs.StatusCompleted, "", at)
		case 1:
			ends[i], err = e.st.Transition(e.ctx, r.ID, live, runs.StatusFailed, "boom", at)
		case 2:
			ends[i], err = e.st.Cancel(e.ctx, r.ID, live, "rec", "", at)
		case 3:
			ends[i], err = e.st.Breach(e.ctx, r.ID, e.breachEv(time.Second), "run_timeout", "timeout", at)
		case 4:
			_, err = e.st.Adopt(e.ctx, r.ID, at)
			if errors.Is(err, runs.ErrStatusConflict) {
				err = nil
			}
			return err
		default:
			_, err = e.st.NoteFailure(e.ctx, r.ID, "transient", at)
			if errors.Is(err, runs.ErrStatusConflict) {
				err = nil
			}
			return err
		}
		if err == nil {
			return nil
		}
		ends[i] = runs.Run{}
		if errors.Is(err, runs.ErrStatusConflict) {
			return errEndLost
		}
		return err
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && ends[i].ID != "":
			if winner >= 0 {
				t.Fatalf("racers %d and %d both ended the run", winner, i)
			}
			winner = i
		case err == nil, errors.Is(err, errEndLost):
		default:
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racer ended the run")
	}
	e.checkExpiry(t, "the race's winner", ends[winner], e.at(time.Duration(winner+1)*time.Second))

	// Only live-keeping writers race: the run stays live, with no expiry.
	r = e.running(t, 0)
	for _, err := range e.race(func(i int) error {
		if i%2 == 0 {
			_, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Duration(i)*time.Second))
			return err
		}
		_, err := e.st.NoteFailure(e.ctx, r.ID, "transient", e.at(time.Duration(i)*time.Second))
		return err
	}) {
		if err != nil {
			t.Fatalf("racing live writer: %v", err)
		}
	}
	e.checkExpiry(t, "a run kept live by racing writers", e.get(t, r.ID), time.Time{})
}

// errEndLost marks a racer whose end found the run ended.
var errEndLost = errors.New("runstest: the run had ended")

// retentionLostAnswer: an end whose answer is lost and is retried leaves
// the first end's expiry (the retry is refused, the run already ended).
func retentionLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	end := e.at(3 * time.Second)
	e.lose("UpdateItem")
	_, _ = e.st.Transition(e.ctx, r.ID, live, runs.StatusCompleted, "", end)
	cur, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCompleted, "", e.at(time.Hour))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCompleted {
		t.Fatalf("retry after a lost answer: %+v %v, want ErrStatusConflict with the run completed", cur, err)
	}
	e.checkExpiry(t, "the lost answer's run", cur, end)
}

// retentionOneWrite: stamping the expiry costs no round trip: an end is
// still one write (with a backend counter, Harness.RoundTrips).
func retentionOneWrite(t *testing.T, e *env) {
	for _, end := range []struct {
		name string
		fn   func(id string) error
	}{
		{"Transition", func(id string) error {
			_, err := e.st.Transition(e.ctx, id, live, runs.StatusCompleted, "", e.now)
			return err
		}},
		{"Cancel", func(id string) error { _, err := e.st.Cancel(e.ctx, id, live, "rec", "", e.now); return err }},
		{"Finish", func(id string) error {
			_, err := e.st.Finish(e.ctx, id, 1, runs.StatusCompleted, "", e.now)
			return err
		}},
		{"Breach", func(id string) error {
			_, err := e.st.Breach(e.ctx, id, e.breachEv(0), "run_timeout", "timeout", e.now)
			return err
		}},
	} {
		r := e.running(t, 0)
		e.resetTrips()
		if err := end.fn(r.ID); err != nil {
			t.Fatalf("%s: %v", end.name, err)
		}
		if n := e.trips(); n != 1 {
			t.Errorf("%s ending a run under a retention took %d round trips, want 1", end.name, n)
		}
	}
}

// retentionCreateCarriesNone: a pending run handed to Create with an
// expiry already set (a Run value copied from an ended one, its
// ExpiresAt included) is stored without it: a live run never expires,
// so it is found, live, once that expiry has passed (by the suite's clock
// it has: the stale expiry is before now).
func retentionCreateCarriesNone(t *testing.T, e *env) {
	r := runs.NewRun("acme", "webhook", []byte(`{"url":"https://example.com/hook"}`), e.now)
	r.ExpiresAt = e.now.Add(-time.Hour).Truncate(time.Second)
	if err := e.st.Create(e.ctx, r); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := e.st.Get(e.ctx, r.ID)
	if err != nil {
		t.Fatalf("a pending run created with a stale expiry reads as %v, want it found", err)
	}
	e.checkExpiry(t, "pending, created with a stale expiry", got, time.Time{})
	if _, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.now); err != nil {
		t.Fatalf("pending -> running: %v", err)
	}
}

// retentionScopeOfAnExpiredHolder: a scope whose holder ended and then
// passed its expiry (deleted by the store's retention) is taken over by
// the next create of the scope, and the expired holder's id is fenced as
// the id of a holder that was never written is: a late create of it (a
// re-execution of the create that named it) never lands, alone or in the
// scope, and the id never reads as a run again. The new holder holds the
// scope while it lives.
func retentionScopeOfAnExpiredHolder(t *testing.T, e *env) {
	h := e.scopedRun("acme", 0)
	e.mustHold(t, h, "s")
	ended, err := e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusPending}, runs.StatusCompleted, "", e.at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e.passExpiry(t, ended)
	if _, err := e.st.Get(e.ctx, h.ID); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("the expired holder reads as %v, want ErrRunNotFound", err)
	}
	next := e.scopedRun("acme", ended.ExpiresAt.Sub(e.now)+time.Minute)
	e.mustHold(t, next, "s")
	if err := e.st.Create(e.ctx, h); !errors.Is(err, runs.ErrRunExists) {
		t.Fatalf("a late create of the expired holder's id: %v, want ErrRunExists (fenced)", err)
	}
	e.mustRefuse(t, h, "s", next.ID)
	if _, err := e.st.Transition(e.ctx, h.ID, live, runs.StatusCancelled, "", e.at(ScopeLater)); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("a transition of the fenced id: %v, want ErrRunNotFound", err)
	}
	if got := e.get(t, next.ID); got.Status != runs.StatusPending || !got.ExpiresAt.IsZero() {
		t.Fatalf("the new holder: %+v, want pending without an expiry", got)
	}
	e.mustRefuse(t, e.scopedRun("acme", ended.ExpiresAt.Sub(e.now)+2*time.Minute), "s", next.ID)
}

// retentionExpiredBeforeItsDeletion: a run past its expiry reads as missing
// by the store's clock alone, before anything deletes it (DynamoDB's TTL
// deletes an expired item some time after its expiry, up to days later):
// Get is ErrRunNotFound, and so is a write that ends it, from that second
// on; a second before, it is read and refused as ended. No deletion
// (Harness.Expire) takes part.
func retentionExpiredBeforeItsDeletion(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	ended, err := e.st.Cancel(e.ctx, r.ID, live, "", "", e.at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.set(ended.ExpiresAt.Add(-time.Second))
	if got := e.get(t, r.ID); got.Status != runs.StatusCancelled {
		t.Fatalf("a second before its expiry: %s, want cancelled", got.Status)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCancelled, "", e.at(2*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a second before its expiry, a transition: %v, want ErrStatusConflict", err)
	}
	e.clock.set(ended.ExpiresAt)
	if got, err := e.st.Get(e.ctx, r.ID); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("at its expiry, not yet deleted: %s %v, want ErrRunNotFound", got.Status, err)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCancelled, "", e.at(3*time.Second)); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("at its expiry, a transition: %v, want ErrRunNotFound", err)
	}
}
