package runstest

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// roundTripsCase is run only with a backend counter (Harness.RoundTrips).
const roundTripsCase = "RoundTrips/OneWriteEach"

// roundTrips holds each claim write that succeeds (the end on a breached
// cap and an execution's Park and Finish among them), and a read, to one
// backend round trip.
func roundTrips(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	var cur runs.Run
	for _, step := range []struct {
		name string
		fn   func() error
	}{
		{"Transition", func() (err error) {
			cur, err = e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.now)
			return err
		}},
		{"AppendLog", func() (err error) {
			cur, err = e.st.AppendLog(e.ctx, r.ID, cur.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}, e.now)
			return err
		}},
		{"Renew", func() (err error) { cur, err = e.st.Renew(e.ctx, r.ID, cur.Epoch, e.at(time.Second)); return err }},
		{"Claim", func() (err error) { cur, err = e.st.Claim(e.ctx, r.ID, e.at(time.Second), e.at(2*window)); return err }},
		{"Adopt", func() (err error) { cur, err = e.st.Adopt(e.ctx, r.ID, e.at(3*window)); return err }},
		{"Get", func() (err error) { cur, err = e.st.Get(e.ctx, r.ID); return err }},
		{"Breach", func() (err error) {
			cur, err = e.st.Breach(e.ctx, r.ID, e.breachEv(3*window), "run_timeout", "timeout", e.at(3*window))
			return err
		}},
	} {
		e.resetTrips()
		if err := step.fn(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := e.trips(); n != 1 {
			t.Errorf("%s took %d round trips, want 1", step.name, n)
		}
	}
	// An execution's park and end under its claim epoch are one write
	// each too.
	f := e.running(t, 0)
	e.resetTrips()
	if _, err := e.st.Park(e.ctx, f.ID, f.Epoch, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.now); err != nil {
		t.Fatalf("Park: %v", err)
	}
	if n := e.trips(); n != 1 {
		t.Errorf("Park took %d round trips, want 1", n)
	}
	e.resetTrips()
	if _, err := e.st.Finish(e.ctx, f.ID, f.Epoch, runs.StatusCompleted, "", e.now); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if n := e.trips(); n != 1 {
		t.Errorf("Finish took %d round trips, want 1", n)
	}
	// A pause and a resume read the run and write it: two round trips
	// each. The end of a node a pause lets drain is the refused append
	// and the drained one: two (three on an engine whose refused write
	// does not return the item, read then).
	pr := e.running(t, 0)
	pr = e.appendEv(t, pr, runs.EventNodeStarted, "a", 0)
	for _, step := range []struct {
		name string
		fn   func() error
	}{
		{"Pause", func() error { _, err := e.st.Pause(e.ctx, pr.ID, runs.Pause{By: "p"}, e.now); return err }},
		{"AppendLog draining", func() error {
			_, err := e.st.AppendLog(e.ctx, pr.ID, pr.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 0)}, e.now)
			return err
		}},
		{"Unpause", func() error { _, err := e.st.Unpause(e.ctx, pr.ID, "r", "", e.now); return err }},
	} {
		e.resetTrips()
		if err := step.fn(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n := e.trips(); n != 2 && (step.name != "AppendLog draining" || n != 3) {
			t.Errorf("%s took %d round trips, want 2", step.name, n)
		}
	}
	// The stale-run pass's release of a held run.paused (its draining
	// execution stopped) is one write.
	_, sp := e.drainingPaused(t)
	e.resetTrips()
	if _, err := e.st.ReleaseStalePause(e.ctx, sp, e.at(3*time.Second), e.at(time.Hour)); err != nil {
		t.Fatalf("ReleaseStalePause: %v", err)
	}
	if n := e.trips(); n != 1 {
		t.Errorf("ReleaseStalePause took %d round trips, want 1", n)
	}
	// A create holding a free scope costs Create's write and the scope's:
	// one round trip more than Create (outside a Layer-1 transaction).
	e.resetTrips()
	e.newRun(t, 0)
	plain := e.trips()
	e.resetTrips()
	e.mustHold(t, e.scopedRun("acme", 0), "free")
	if n := e.trips(); n != plain+1 {
		t.Errorf("CreateScoped of a free scope took %d round trips, want %d (Create's %d + 1)", n, plain+1, plain)
	}
	// Taking over the scope of a holder that ended costs Create's write,
	// the scope's refused write, a read of the holder (and a read of the
	// scope where a failed condition does not return the item) and the
	// takeover write: three or four round trips more than Create.
	h := e.scopedRun("acme", 0)
	e.mustHold(t, h, "ended")
	if _, err := e.st.Transition(e.ctx, h.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", e.now); err != nil {
		t.Fatal(err)
	}
	e.resetTrips()
	e.mustHold(t, e.scopedRun("acme", time.Second), "ended")
	if n := e.trips(); n != plain+3 && n != plain+4 {
		t.Errorf("CreateScoped taking over an ended holder's scope took %d round trips, want %d or %d", n, plain+3, plain+4)
	}
}
