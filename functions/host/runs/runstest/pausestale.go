package runstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// drainingPaused is a run paused (drain-current-node) at 2s while node a
// (started at 1s) is under way, its execution's claim last renewed at
// 3s: the run as the stale-run pass finds it once that execution stops.
func (e *env) drainingPaused(t *testing.T) (started, paused runs.Run) {
	t.Helper()
	r := e.running(t, 0)
	r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
	if held := e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, 2*time.Second); held.PausePending == nil {
		t.Fatalf("pause while node a executes: %+v, want run.paused held", held)
	}
	got, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(3*time.Second))
	if err != nil {
		t.Fatalf("the draining execution's renewal: %v", err)
	}
	return r, got
}

// heldOnce reports how many times r shows its run.paused: in its log,
// and held (a cancelled run keeps a held one, shown after its log).
func heldOnce(r runs.Run) int {
	n := count(r, runs.EventRunPaused)
	if r.PausePending != nil {
		n++
	}
	return n
}

// pauseStaleDrain: a drain-current-node pause of a run whose execution
// stopped mid-node (died, or ended on a transient failure: NoteFailure is
// refused on a paused run and moves nothing) is listed by Stale once its
// claim went unrenewed past the bound, and never before; Claim refuses it
// (it is not live) with the run as stored, and ReleaseStalePause of that
// run records the held run.paused in the log: once, the run still
// paused, out of Stale, the returning execution refused its node's end
// and its renewal, the resume recording run.resumed and no second
// run.paused. Under a bound the renewal passed, or once the node drained
// (or its execution parked the run), nothing is released, and a drained
// run leaves Stale.
func pauseStaleDrain(t *testing.T, e *env) {
	r, held := e.drainingPaused(t)
	if _, err := e.st.NoteFailure(e.ctx, r.ID, "transient", e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a failure noted on the paused run: %v, want ErrStatusConflict", err)
	}
	if e.stale(t, e.at(3*time.Second-time.Millisecond), r.ID) {
		t.Fatal("a draining run whose claim was renewed since the bound is listed stale")
	}
	if got, err := e.st.ReleaseStalePause(e.ctx, held, e.at(3*time.Second-time.Millisecond), e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) ||
		got.PausePending == nil || count(got, runs.EventRunPaused) != 0 {
		t.Fatalf("release under a bound the renewal passed: held %v, log %v, %v; want ErrStatusConflict, still held", got.PausePending != nil, logTypes(got), err)
	}
	before := e.at(3 * time.Second)
	if !e.stale(t, before, r.ID) {
		t.Fatal("a paused run whose draining execution stopped renewing is not listed stale")
	}
	cur, err := e.st.Claim(e.ctx, r.ID, before, e.at(time.Hour))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusPaused || cur.PausePending == nil || cur.Epoch != r.Epoch {
		t.Fatalf("claim of the paused run: %s, held %v, epoch %d, %v; want ErrStatusConflict with the run paused, holding run.paused, epoch %d",
			cur.Status, cur.PausePending != nil, cur.Epoch, err, r.Epoch)
	}
	got, err := e.st.ReleaseStalePause(e.ctx, cur, before, e.at(time.Hour))
	if err != nil || got.Status != runs.StatusPaused || got.PausePending != nil || got.Epoch != r.Epoch || got.Version != held.Version ||
		!slices.Equal(logTypes(got), []string{"node.started@a", "run.paused@"}) || !got.UpdatedAt.Equal(e.at(time.Hour)) {
		t.Fatalf("release: %s, held %v, epoch %d, version %d, log %v, updated %v, %v; want paused, run.paused in the log, epoch and version kept",
			got.Status, got.PausePending != nil, got.Epoch, got.Version, logTypes(got), got.UpdatedAt, err)
	}
	if p := lastPause(t, got); p.DrainPolicy != runs.DrainCurrentNode || p.InterruptedNodeID != "" || !got.Log[1].At.Equal(e.at(time.Hour)) {
		t.Fatalf("released run.paused %+v at %v, want drain-current-node, nothing cut, at the release", p, got.Log[1].At)
	}
	if !sameRun(e.get(t, r.ID), got) {
		t.Fatalf("released run reads back %+v, want %+v", e.get(t, r.ID), got)
	}
	if again, err := e.st.ReleaseStalePause(e.ctx, cur, before, e.at(2*time.Hour)); !errors.Is(err, runs.ErrStatusConflict) || count(again, runs.EventRunPaused) != 1 {
		t.Fatalf("a second release: log %v, %v; want ErrStatusConflict, one run.paused", logTypes(again), err)
	}
	if e.stale(t, e.at(3*time.Hour), r.ID) {
		t.Fatal("a paused run whose run.paused was released is still listed stale")
	}
	// The execution coming back late writes nothing more.
	if _, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 2*time.Hour)}, e.at(2*time.Hour)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the returning execution's node end: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(2*time.Hour)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the returning execution's renewal: %v, want ErrStatusConflict", err)
	}
	res, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(3*time.Hour))
	if err != nil || !slices.Equal(logTypes(res), []string{"node.started@a", "run.paused@", "run.resumed@"}) || res.Epoch != r.Epoch+1 {
		t.Fatalf("resume after the release: log %v, epoch %d, %v; want one run.paused then run.resumed, epoch %d", logTypes(res), res.Epoch, err, r.Epoch+1)
	}
	// A node that drained, or whose execution parked the run, leaves
	// Stale and releases nothing more.
	d, dheld := e.drainingPaused(t)
	if _, err := e.st.AppendLog(e.ctx, d.ID, d.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second)); err != nil {
		t.Fatalf("the drained node's end: %v", err)
	}
	if e.stale(t, e.at(time.Hour), d.ID) {
		t.Fatal("a drained paused run is listed stale")
	}
	if got, err := e.st.ReleaseStalePause(e.ctx, dheld, e.at(time.Hour), e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) || count(got, runs.EventRunPaused) != 1 {
		t.Fatalf("release after the drain: log %v, %v; want ErrStatusConflict, one run.paused", logTypes(got), err)
	}
	p, pheld := e.drainingPaused(t)
	if _, err := e.st.Park(e.ctx, p.ID, p.Epoch, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the draining execution's park: %v, want refused (paused)", err)
	}
	if e.stale(t, e.at(time.Hour), p.ID) {
		t.Fatal("a paused run whose execution parked it is listed stale")
	}
	if got, err := e.st.ReleaseStalePause(e.ctx, pheld, e.at(time.Hour), e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) || count(got, runs.EventRunPaused) != 1 {
		t.Fatalf("release after the park: log %v, %v; want ErrStatusConflict, one run.paused", logTypes(got), err)
	}
	// A read of an earlier drain releases nothing of a later one: the
	// run drained, resumed (a new epoch) and is draining again.
	o, oheld := e.drainingPaused(t)
	if _, err := e.st.AppendLog(e.ctx, o.ID, o.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second)); err != nil {
		t.Fatalf("the drained node's end: %v", err)
	}
	res, err = e.st.Unpause(e.ctx, o.ID, "r1", "", e.at(5*time.Second))
	if err != nil {
		t.Fatalf("resume after the drain: %v", err)
	}
	res = e.appendEv(t, res, runs.EventNodeStarted, "b", 6*time.Second)
	if again := e.pauseWith(t, o.ID, runs.Pause{By: "p2"}, 7*time.Second); again.PausePending == nil || again.Epoch != oheld.Epoch+1 {
		t.Fatalf("pause while node b executes: %+v, want run.paused held under epoch %d", again, oheld.Epoch+1)
	}
	if got, err := e.st.ReleaseStalePause(e.ctx, oheld, e.at(time.Hour), e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) || got.PausePending == nil {
		t.Fatalf("release by a read of the earlier drain: held %v, log %v, %v; want ErrStatusConflict, the later drain still held", got.PausePending != nil, logTypes(got), err)
	}
	// A run paused between nodes holds nothing and is never listed.
	b := e.running(t, 0)
	e.pauseWith(t, b.ID, runs.Pause{By: "p1"}, time.Second)
	if e.stale(t, e.at(time.Hour), b.ID) {
		t.Fatal("a run paused between nodes is listed stale")
	}
}

// pauseStaleDrainRace: releases of a stale draining pause (racing each
// other, as stale-run passes at once do) racing the execution's return
// (its node's end, its renewal, its park), a resume or a cancel: the run
// shows its run.paused exactly once whoever wins (in its log, or held on
// a run cancelled first, or still held for an execution that renewed
// first), Stale lists it only while that holds, and a resume after it
// records no second one.
func pauseStaleDrainRace(t *testing.T, e *env) {
	before, now := e.at(3*time.Second), e.at(time.Hour)
	for _, other := range []string{"release", "drain", "renew", "park", "resume", "cancel"} {
		for range 3 {
			r, _ := e.drainingPaused(t)
			cur, err := e.st.Claim(e.ctx, r.ID, before, now)
			if !errors.Is(err, runs.ErrStatusConflict) || cur.PausePending == nil {
				t.Fatalf("claim of the paused run: %+v %v", cur, err)
			}
			released := 0
			for i, err := range e.race(func(i int) error {
				if i == 0 {
					var err error
					switch other {
					case "release":
						_, err = e.st.ReleaseStalePause(e.ctx, cur, before, now)
					case "drain":
						_, err = e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second))
					case "renew":
						_, err = e.st.Renew(e.ctx, r.ID, r.Epoch, now)
					case "park":
						_, err = e.st.Park(e.ctx, r.ID, r.Epoch, runs.Wake{At: now.Add(time.Minute), Attempt: 1, MaxAttempts: 3}, now)
					case "resume":
						_, err = e.st.Unpause(e.ctx, r.ID, "r1", "", now)
					case "cancel":
						_, err = e.st.Cancel(e.ctx, r.ID, livePaused, "c1", "", now)
					}
					return err
				}
				_, err := e.st.ReleaseStalePause(e.ctx, cur, before, now)
				return err
			}) {
				switch {
				case err == nil && (i > 0 || other == "release"):
					released++
				case err == nil, errors.Is(err, runs.ErrStatusConflict):
				default:
					t.Fatalf("%s racing releases: %v", other, err)
				}
			}
			got := e.get(t, r.ID)
			if heldOnce(got) != 1 || released > 1 || (other == "release" && released != 1) {
				t.Fatalf("%s racing releases: %s, %d releases won, log %v, held %v; want run.paused shown once",
					other, got.Status, released, logTypes(got), got.PausePending != nil)
			}
			// Listed while its run.paused is held (an execution that
			// renewed first), or live again (resumed first).
			if listed, want := e.stale(t, now.Add(time.Hour), r.ID), got.PausePending != nil && got.Status == runs.StatusPaused || got.Status == runs.StatusRunning; listed != want {
				t.Fatalf("%s racing releases: %s, held %v, listed stale %v", other, got.Status, got.PausePending != nil, listed)
			}
			if got.Status != runs.StatusPaused {
				continue
			}
			res, err := e.st.Unpause(e.ctx, r.ID, "r2", "", now.Add(time.Second))
			if err != nil || count(res, runs.EventRunPaused) != 1 || res.PausePending != nil || res.Log[len(res.Log)-1].Type != runs.EventRunResumed {
				t.Fatalf("resume after %s raced releases: log %v, %v; want one run.paused, then run.resumed", other, logTypes(res), err)
			}
		}
	}
}

// pauseStaleDrainLostAnswer: a release whose answer was lost (retried by
// the store, or by the next pass) records the held run.paused once.
func pauseStaleDrainLostAnswer(t *testing.T, e *env) {
	r, held := e.drainingPaused(t)
	e.lose("UpdateItem")
	if got, err := e.st.ReleaseStalePause(e.ctx, held, e.at(3*time.Second), e.at(time.Hour)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("release, answer lost: %+v %v", got, err)
	}
	if _, err := e.st.ReleaseStalePause(e.ctx, held, e.at(3*time.Second), e.at(2*time.Hour)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the release's retry: %v", err)
	}
	if got := e.get(t, r.ID); got.PausePending != nil || count(got, runs.EventRunPaused) != 1 || got.Status != runs.StatusPaused {
		t.Fatalf("after a lost answer and a retry: %s, held %v, log %v; want paused, one run.paused", got.Status, got.PausePending != nil, logTypes(got))
	}
}
