package runstest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// finishFenced: Finish ends a running run only under its current claim
// epoch. An execution taken over (Adopt, Claim, Resume) is refused with the
// run as it is, which stays running under the taker, unchanged; the taker
// ends it (failed with its message, the wake cleared, the epoch kept, one
// version added). A pending, cancelled or missing run is refused, and so is
// a Finish to a status that is not completed or failed.
func finishFenced(t *testing.T, e *env) {
	r := e.running(t, 0)
	taken, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning || cur.Epoch != taken.Epoch {
		t.Fatalf("the end of an execution taken over: %+v %v, want ErrStatusConflict with the run running at epoch %d", cur, err, taken.Epoch)
	}
	if got := e.get(t, r.ID); got.Status != runs.StatusRunning || got.Version != taken.Version || !got.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("a refused end changed the run: %+v", got)
	}
	for _, to := range []runs.Status{runs.StatusCancelled, runs.StatusRunning, runs.StatusPending} {
		if _, err := e.st.Finish(e.ctx, r.ID, taken.Epoch, to, "", e.at(2*time.Second)); err == nil || errors.Is(err, runs.ErrStatusConflict) {
			t.Fatalf("Finish to %s: %v, want refused as a bad status", to, err)
		}
	}
	if got := e.get(t, r.ID); got.Status != runs.StatusRunning || got.Version != taken.Version {
		t.Fatalf("a Finish to a bad status changed the run: %+v", got)
	}
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	parked := e.get(t, r.ID)
	got, err := e.st.Finish(e.ctx, r.ID, taken.Epoch, runs.StatusFailed, "boom", e.at(3*time.Second))
	if err != nil || got.Status != runs.StatusFailed || got.Error != "boom" || !got.Wake.IsZero() || got.Epoch != taken.Epoch ||
		got.Version != parked.Version+1 || !got.UpdatedAt.Equal(e.at(3*time.Second)) {
		t.Fatalf("the holder's end: %+v %v, want failed, the wake cleared, epoch %d, version %d", got, err, taken.Epoch, parked.Version+1)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("an ended run is due: %v %v", ids, err)
	}
	if e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("an ended run is listed stale")
	}

	// Overtaken by the stale-run pass's claim, and by a due pass's resume.
	r = e.running(t, 0)
	if _, err := e.st.Claim(e.ctx, r.ID, e.at(time.Second), e.at(2*window)); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(2*window)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning {
		t.Fatalf("the end of an execution overtaken by a claim: %+v %v, want ErrStatusConflict", cur, err)
	}
	r = e.running(t, 0)
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Resume(e.ctx, r.ID, e.at(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(time.Minute)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning {
		t.Fatalf("the end of an execution overtaken by a resume: %+v %v, want ErrStatusConflict", cur, err)
	}

	// Not running: pending (never taken), cancelled, missing.
	p := e.newRun(t, 0)
	if cur, err := e.st.Finish(e.ctx, p.ID, 0, runs.StatusCompleted, "", e.now); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusPending {
		t.Fatalf("Finish of a pending run: %+v %v, want ErrStatusConflict", cur, err)
	}
	c := e.running(t, 0)
	if _, err := e.st.Cancel(e.ctx, c.ID, live, "rec", "", e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Finish(e.ctx, c.ID, c.Epoch, runs.StatusCompleted, "", e.at(2*time.Second)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCancelled {
		t.Fatalf("Finish of a cancelled run: %+v %v, want ErrStatusConflict with the run cancelled", cur, err)
	}
	if _, err := e.st.Finish(e.ctx, runs.NewRunID("acme"), 1, runs.StatusCompleted, "", e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("Finish of no run: %v", err)
	}
}

// finishRace: an execution's end races other executions taking the run
// (Adopt). The end lands only if no taking came first: a run that ended
// completed was taken by none of the racers, and a run still running was
// not ended.
func finishRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	ends, takes := 0, 0
	errs := e.race(func(i int) error {
		if i%2 == 0 {
			_, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(time.Second))
			if err == nil {
				return errEnded
			}
			return err
		}
		_, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second))
		if err == nil {
			return errTaken
		}
		return err
	})
	for i, err := range errs {
		switch {
		case errors.Is(err, errEnded):
			ends++
		case errors.Is(err, errTaken):
			takes++
		case !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	got := e.get(t, r.ID)
	switch {
	case got.Status == runs.StatusCompleted && (ends != 1 || takes != 0 || got.Epoch != r.Epoch):
		t.Fatalf("run completed at epoch %d after %d ends and %d takings, want one end, no taking, epoch %d", got.Epoch, ends, takes, r.Epoch)
	case got.Status == runs.StatusRunning && (ends != 0 || takes == 0 || got.Epoch != r.Epoch+int64(takes)):
		t.Fatalf("run running at epoch %d after %d ends and %d takings", got.Epoch, ends, takes)
	case got.Status != runs.StatusCompleted && got.Status != runs.StatusRunning:
		t.Fatalf("run %s", got.Status)
	}
}

var (
	errEnded = errors.New("runstest: ended")
	errTaken = errors.New("runstest: taken")
)

// finishLostAnswer: the end applied and its answer was lost; the call is
// answered as its write left the run (RED_TEAM 500), one version added; a
// later call's retry is a conflict with the run already at the target
// status (and the epoch the end held).
func finishLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if cur, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(time.Second)); err != nil ||
		cur.Status != runs.StatusCompleted || cur.Epoch != r.Epoch || cur.Version != 3 {
		t.Fatalf("the end whose answer was lost: %+v %v, want the run completed at version 3", cur, err)
	}
	cur, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCompleted || cur.Epoch != r.Epoch || cur.Version != 3 ||
		!cur.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("retry of an applied end: %+v %v, want ErrStatusConflict with the run completed at version 3", cur, err)
	}
}
