package runstest

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// parkFenced: Park parks a running run only under its current claim
// epoch. An execution taken over (Adopt, Claim) is refused with the run as
// it is, unparked and unchanged; the holder parks it (the wake read back,
// due from its time, one version added, the epoch kept). A pending, ended
// or missing run is refused.
func parkFenced(t *testing.T, e *env) {
	r := e.running(t, 0)
	w := runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3, Deadline: e.at(time.Hour)}
	taken, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := e.st.Park(e.ctx, r.ID, r.Epoch, w, e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning || cur.Epoch != taken.Epoch {
		t.Fatalf("the park of an execution taken over: %+v %v, want ErrStatusConflict with the run running at epoch %d", cur, err, taken.Epoch)
	}
	if got := e.get(t, r.ID); !got.Wake.IsZero() || got.Version != taken.Version || !got.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("a refused park changed the run: %+v", got)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("a refused park made the run due: %v %v", ids, err)
	}
	got, err := e.st.Park(e.ctx, r.ID, taken.Epoch, w, e.at(2*time.Second))
	if err != nil || got.Status != runs.StatusRunning || got.Epoch != taken.Epoch || !got.Wake.At.Equal(w.At) || got.Wake.Attempt != 1 ||
		got.Wake.MaxAttempts != 3 || !got.Wake.Deadline.Equal(w.Deadline) || got.Version != taken.Version+1 || !got.UpdatedAt.Equal(e.at(2*time.Second)) {
		t.Fatalf("the holder's park: %+v %v", got, err)
	}
	if read := e.get(t, r.ID); !read.Wake.At.Equal(w.At) || read.Version != got.Version {
		t.Fatalf("the park reads back as %+v", read)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Minute), 0); err != nil || len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("due at the wake: %v %v", ids, err)
	}

	// Overtaken by the stale-run pass's claim.
	c := e.running(t, 0)
	if _, err := e.st.Claim(e.ctx, c.ID, e.at(time.Second), e.at(2*window)); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Park(e.ctx, c.ID, c.Epoch, w, e.at(2*window)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning || !cur.Wake.IsZero() {
		t.Fatalf("the park of an execution overtaken by a claim: %+v %v, want ErrStatusConflict", cur, err)
	}

	// Not running: pending, cancelled, missing.
	p := e.newRun(t, 0)
	if cur, err := e.st.Park(e.ctx, p.ID, 0, w, e.now); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusPending || !cur.Wake.IsZero() {
		t.Fatalf("Park of a pending run: %+v %v, want ErrStatusConflict", cur, err)
	}
	x := e.running(t, 0)
	if _, err := e.st.Cancel(e.ctx, x.ID, live, "rec", "", e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Park(e.ctx, x.ID, x.Epoch, w, e.at(2*time.Second)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCancelled {
		t.Fatalf("Park of a cancelled run: %+v %v, want ErrStatusConflict with the run cancelled", cur, err)
	}
	if _, err := e.st.Park(e.ctx, runs.NewRunID("acme"), 1, w, e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("Park of no run: %v", err)
	}
}

// parkLostAnswer: the park applied and its answer was lost; the call is
// answered with the run parked, one version added (RED_TEAM 500: its
// store retry is not applied again); the caller's retry (same epoch,
// still running) parks again: one wake, due once.
func parkLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	w := runs.Wake{At: e.at(time.Minute), Attempt: 2, MaxAttempts: 4}
	e.lose("UpdateItem")
	if got, err := e.st.Park(e.ctx, r.ID, r.Epoch, w, e.now); err != nil || !got.Wake.At.Equal(w.At) || got.Version != r.Version+1 {
		t.Fatalf("the park whose answer was lost: %+v %v, want the run parked at version %d", got, err, r.Version+1)
	}
	if _, err := e.st.Park(e.ctx, r.ID, r.Epoch, w, e.now); err != nil {
		t.Fatal(err)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 1 || ids[0] != r.ID {
		t.Fatalf("due after a retried park: %v %v", ids, err)
	}
	if got := e.get(t, r.ID); !got.Wake.At.Equal(w.At) || got.Wake.Attempt != 2 || got.Epoch != r.Epoch {
		t.Fatalf("wake %+v at epoch %d", got.Wake, got.Epoch)
	}
}
