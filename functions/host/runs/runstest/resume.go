package runstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// parked returns a running run parked until d (its wake), as stored.
func (e *env) parked(t *testing.T, d time.Duration) runs.Run {
	t.Helper()
	r := e.running(t, 0)
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(d), Attempt: 1, MaxAttempts: 5}, e.now); err != nil {
		t.Fatalf("schedule: %v", err)
	}
	return e.get(t, r.ID)
}

// due reports whether Due(at) lists id.
func (e *env) due(t *testing.T, at time.Time, id string) bool {
	t.Helper()
	ids, err := e.st.Due(e.ctx, at, 0)
	if err != nil {
		t.Fatalf("due: %v", err)
	}
	return slices.Contains(ids, id)
}

// resumeTakesTheWake: a due parked run is taken once, its wake cleared (no
// longer due, nor shown waiting), a new epoch, a new version; it is then a
// running run the stale-run pass finds. A run not yet due, not parked, or
// ended is refused.
func resumeTakesTheWake(t *testing.T, e *env) {
	r := e.parked(t, time.Minute)
	if cur, err := e.st.Resume(e.ctx, r.ID, e.at(30*time.Second)); !errors.Is(err, runs.ErrStatusConflict) || cur.Wake.IsZero() {
		t.Fatalf("resuming before the wake time: %+v %v, want ErrStatusConflict and the run still parked", cur, err)
	}
	got, err := e.st.Resume(e.ctx, r.ID, e.at(time.Minute))
	if err != nil || !got.Wake.IsZero() || got.Epoch != r.Epoch+1 || !got.UpdatedAt.Equal(e.at(time.Minute)) || got.Version != r.Version+1 {
		t.Fatalf("resume: %+v %v; want the wake cleared, epoch %d, updatedAt the resume, version %d", got, err, r.Epoch+1, r.Version+1)
	}
	if stored := e.get(t, r.ID); !stored.Wake.IsZero() || stored.Epoch != got.Epoch || stored.Status != runs.StatusRunning {
		t.Fatalf("stored after resume: %+v", stored)
	}
	if e.due(t, e.at(time.Hour), r.ID) {
		t.Fatal("a resumed run is still due: the next pass would take it from its execution")
	}
	if cur, err := e.st.Resume(e.ctx, r.ID, e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) || cur.Epoch != got.Epoch {
		t.Fatalf("resuming again: %+v %v, want ErrStatusConflict and the epoch kept", cur, err)
	}
	if !e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("a resumed run whose executor stopped is not found by the stale-run pass")
	}
	if _, err := e.st.Resume(e.ctx, e.running(t, 0).ID, e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("resuming a run that is not parked: %v, want ErrStatusConflict", err)
	}
	ended := e.parked(t, 0)
	if _, err := e.st.Transition(e.ctx, ended.ID, live, runs.StatusCancelled, "", e.now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Resume(e.ctx, ended.ID, e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("resuming an ended run: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Resume(e.ctx, runs.NewRunID("acme"), e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("resuming no run: %v", err)
	}
}

// resumeRace: of due passes racing for one run exactly one takes it.
func resumeRace(t *testing.T, e *env) {
	r := e.parked(t, 0)
	taken := 0
	for _, err := range e.race(func(int) error {
		_, err := e.st.Resume(e.ctx, r.ID, e.at(time.Second))
		return err
	}) {
		switch {
		case err == nil:
			taken++
		case !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("racing resume: %v", err)
		}
	}
	if got := e.get(t, r.ID); taken != 1 || got.Epoch != r.Epoch+1 {
		t.Fatalf("%d of %d racing passes took the run (epoch %d); want exactly one", taken, e.racers, got.Epoch)
	}
}

// resumeLostAnswer: the resume applied and its answer was lost; the retry
// is refused (the run is no longer parked) and the run is left to the
// stale-run pass, never taken twice by due passes.
//
// The call whose answer was lost is answered with the run it resumed
// (RED_TEAM 500): its pass drives it.
func resumeLostAnswer(t *testing.T, e *env) {
	r := e.parked(t, 0)
	e.lose("UpdateItem")
	if got, err := e.st.Resume(e.ctx, r.ID, e.at(time.Second)); err != nil || !got.Wake.IsZero() || got.Epoch != r.Epoch+1 {
		t.Fatalf("the resume whose answer was lost: %+v %v, want the run resumed at epoch %d", got, err, r.Epoch+1)
	}
	if got := e.get(t, r.ID); !got.Wake.IsZero() {
		t.Fatalf("the resume whose answer was lost did not apply: %+v", got.Wake)
	}
	if _, err := e.st.Resume(e.ctx, r.ID, e.at(time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("retry of an applied resume: %v, want ErrStatusConflict", err)
	}
	if !e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("the run is not left to the stale-run pass")
	}
}
