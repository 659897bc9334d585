package runstest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

var live = []runs.Status{runs.StatusPending, runs.StatusRunning}

func transitionCAS(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	got, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(time.Second))
	if err != nil || got.Status != runs.StatusRunning || got.Version != 2 || got.Epoch != 1 || !got.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("pending -> running: %+v %v, want running at version 2, epoch 1", got, err)
	}
	cur, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning || cur.Version != 2 {
		t.Fatalf("a transition from a status the run left: %+v %v, want ErrStatusConflict with the run as it is", cur, err)
	}
	if _, err := e.st.Transition(e.ctx, runs.NewRunID("acme"), live, runs.StatusFailed, "", e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("transition of no run: %v", err)
	}
}

func transitionTerminal(t *testing.T, e *env) {
	r := e.running(t, 0)
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.now); err != nil {
		t.Fatal(err)
	}
	got, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusFailed, "boom", e.at(time.Second))
	if err != nil || got.Status != runs.StatusFailed || got.Error != "boom" || !got.Wake.IsZero() || got.Epoch != 1 {
		t.Fatalf("running -> failed: %+v %v, want failed, the wake cleared, the epoch kept", got, err)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("an ended run is due: %v %v", ids, err)
	}
	if e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("an ended run is listed stale")
	}
}

func transitionRace(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	wins := 0
	for _, err := range e.race(func(int) error {
		_, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.now)
		return err
	}) {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("racing transition: %v", err)
		}
	}
	if got := e.get(t, r.ID); wins != 1 || got.Version != 2 || got.Epoch != 1 {
		t.Fatalf("%d racing transitions won (version %d, epoch %d), want 1 (2, 1)", wins, got.Version, got.Epoch)
	}
}

// transitionLostAnswer: the transition applied and its answer was lost;
// the call is answered as its write left the run (the store recognises
// its own landed write: never a conflict its caller did not cause,
// RED_TEAM 500), and one version was added. A later call's retry is a
// conflict whose run already has the target status.
func transitionLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if cur, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", e.at(time.Second)); err != nil ||
		cur.Status != runs.StatusCompleted || cur.Version != 3 || !cur.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("the transition whose answer was lost: %+v %v, want the run completed at version 3", cur, err)
	}
	cur, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCompleted || cur.Version != 3 || !cur.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("retry of an applied transition: %+v %v, want ErrStatusConflict with the run completed at version 3", cur, err)
	}
}

// cancelLostAnswer: a cancel that applied and whose answer was lost is
// answered as its write left the run, cancelled, though it names no
// writer its caller could recognise the run by (RED_TEAM 500); a cancel
// from pending or running (Cancel) and one at the version read
// (CancelAt, where the store has it) alike. One version is added.
func cancelLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if c, err := e.st.Cancel(e.ctx, r.ID, live, "", "no longer wanted", e.at(time.Second)); err != nil ||
		c.Status != runs.StatusCancelled || c.Version != r.Version+1 || c.CancelReason != "no longer wanted" {
		t.Fatalf("the cancel whose answer was lost: %s %v, want the run cancelled at version %d", c.Status, err, r.Version+1)
	}
	ca, ok := e.st.(runs.VersionCanceller)
	if !ok {
		return
	}
	r = e.running(t, 0)
	e.lose("UpdateItem")
	if c, err := ca.CancelAt(e.ctx, r.ID, r.Version, "", "", e.at(time.Second)); err != nil || c.Status != runs.StatusCancelled || c.Version != r.Version+1 {
		t.Fatalf("the versioned cancel whose answer was lost: %s %v, want the run cancelled at version %d", c.Status, err, r.Version+1)
	}
}

func noteFailureCounts(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	for want := 1; want <= 2; want++ {
		n, err := e.st.NoteFailure(e.ctx, r.ID, "effect in flight", e.at(time.Second))
		if err != nil || n != want {
			t.Fatalf("failure %d counted as %d (%v)", want, n, err)
		}
	}
	got := e.get(t, r.ID)
	if got.Failures != 2 || got.LastError != "effect in flight" || got.Status != runs.StatusPending || got.Version != 3 {
		t.Fatalf("after two failures: %+v", got)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCancelled, "", e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	before := e.get(t, r.ID)
	if _, err := e.st.NoteFailure(e.ctx, r.ID, "late", e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a failure of an ended run: %v, want ErrStatusConflict", err)
	}
	if after := e.get(t, r.ID); after.Failures != before.Failures || after.LastError != before.LastError ||
		!after.UpdatedAt.Equal(before.UpdatedAt) || after.Version != before.Version {
		t.Fatalf("a late failure changed an ended run: %+v -> %+v", before, after)
	}
	if _, err := e.st.NoteFailure(e.ctx, runs.NewRunID("acme"), "x", e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("a failure of no run: %v", err)
	}
}

func noteFailureRace(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	seen := map[int]bool{}
	counts := make([]int, e.racers)
	for i, err := range e.race(func(i int) error {
		n, err := e.st.NoteFailure(e.ctx, r.ID, "x", e.now)
		counts[i] = n
		return err
	}) {
		if err != nil {
			t.Fatalf("racing failure: %v", err)
		}
		seen[counts[i]] = true
	}
	if got := e.get(t, r.ID); got.Failures != e.racers || len(seen) != e.racers {
		t.Fatalf("%d racing failures counted %d (answers %v)", e.racers, got.Failures, counts)
	}
}

// noteFailureLostAnswer: the count applied and its answer was lost; the
// retry counts again: a count may run high (a run given up early), never
// low (never late).
func noteFailureLostAnswer(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	e.lose("UpdateItem")
	first, _ := e.st.NoteFailure(e.ctx, r.ID, "x", e.now)
	n, err := e.st.NoteFailure(e.ctx, r.ID, "x", e.now)
	if got := e.get(t, r.ID); err != nil || n < 2 || n <= first || n != got.Failures {
		t.Fatalf("retry of an applied count: %d %v (first answer %d, stored %d), want at least 2, the stored count", n, err, first, got.Failures)
	}
}

func scheduleDue(t *testing.T, e *env) {
	early, late, ended := e.running(t, 0), e.newRun(t, 0), e.newRun(t, 0)
	for _, p := range []struct {
		id string
		at time.Duration
	}{{late.ID, 2 * time.Minute}, {early.ID, time.Minute}} {
		if err := e.st.Schedule(e.ctx, p.id, runs.Wake{At: e.at(p.at), Attempt: 1, MaxAttempts: 4, Deadline: e.at(time.Hour)}, e.now); err != nil {
			t.Fatal(err)
		}
	}
	got := e.get(t, early.ID)
	if !got.Wake.At.Equal(e.at(time.Minute)) || got.Wake.Attempt != 1 || got.Wake.MaxAttempts != 4 || !got.Wake.Deadline.Equal(e.at(time.Hour)) {
		t.Fatalf("wake read back %+v", got.Wake)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Minute-time.Millisecond), 0); err != nil || len(ids) != 0 {
		t.Fatalf("due before its wake: %v %v", ids, err)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Minute), 0); err != nil || len(ids) != 1 || ids[0] != early.ID {
		t.Fatalf("due at the first wake: %v %v, want [early]", ids, err)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 2 || ids[0] != early.ID || ids[1] != late.ID {
		t.Fatalf("due later: %v %v, want [early late]", ids, err)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 1); err != nil || len(ids) != 1 || ids[0] != early.ID {
		t.Fatalf("due with limit 1: %v %v", ids, err)
	}
	if _, err := e.st.Transition(e.ctx, ended.ID, live, runs.StatusCancelled, "", e.now); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Schedule(e.ctx, ended.ID, runs.Wake{At: e.at(time.Minute)}, e.now); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("parking an ended run: %v, want ErrStatusConflict", err)
	}
	if err := e.st.Schedule(e.ctx, runs.NewRunID("acme"), runs.Wake{At: e.at(time.Minute)}, e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("parking no run: %v", err)
	}
}

// scheduleLostAnswer: the park applied and its answer was lost; the call
// succeeds and adds one version (RED_TEAM 500: its store retry is not
// applied again); the caller's retry leaves one wake and the run is due
// once.
func scheduleLostAnswer(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	w := runs.Wake{At: e.at(time.Minute), Attempt: 2, MaxAttempts: 4}
	e.lose("UpdateItem")
	if err := e.st.Schedule(e.ctx, r.ID, w, e.now); err != nil {
		t.Fatalf("the park whose answer was lost: %v", err)
	}
	if got := e.get(t, r.ID); got.Version != r.Version+1 {
		t.Fatalf("the park whose answer was lost left version %d, want %d (applied once)", got.Version, r.Version+1)
	}
	if err := e.st.Schedule(e.ctx, r.ID, w, e.now); err != nil {
		t.Fatal(err)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("due after a retried park: %v %v", ids, err)
	}
	if got := e.get(t, r.ID); !got.Wake.At.Equal(w.At) || got.Wake.Attempt != 2 {
		t.Fatalf("wake %+v", got.Wake)
	}
}
