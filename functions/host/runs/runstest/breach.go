package runstest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// breachEv is a cap.breached event at d.
func (e *env) breachEv(d time.Duration) runs.LogEvent {
	return runs.LogEvent{Type: runs.EventCapBreached, At: e.at(d),
		Payload: json.RawMessage(`{"kind":"run-duration","limit":1000,"observed":1000}`)}
}

// breached counts the cap.breached events of a run's log.
func breached(r runs.Run) int {
	n := 0
	for _, ev := range r.Log {
		if ev.Type == runs.EventCapBreached {
			n++
		}
	}
	return n
}

// breachEnds: a pending run and a running one (parked, with a node log)
// end failed with the code and message, the event appended after the log,
// the wake cleared, out of Stale and Due, one version added; a run that
// ended first is ErrStatusConflict and unchanged.
func breachEnds(t *testing.T, e *env) {
	pending := e.newRun(t, 0)
	got, err := e.st.Breach(e.ctx, pending.ID, e.breachEv(time.Second), "run_timeout", "the run exceeded its runTimeoutMs", e.at(time.Second))
	if err != nil || got.Status != runs.StatusFailed || got.ErrorCode != "run_timeout" || got.Error != "the run exceeded its runTimeoutMs" ||
		got.Version != 2 || breached(got) != 1 || !got.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("breach of a pending run: %+v %v, want failed run_timeout at version 2 with one cap.breached", got, err)
	}
	if read := e.get(t, pending.ID); read.ErrorCode != "run_timeout" || breached(read) != 1 || read.Status != runs.StatusFailed {
		t.Fatalf("the breached run reads back as %+v", read)
	}

	r := e.running(t, 0)
	if _, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}, e.now); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.now); err != nil {
		t.Fatal(err)
	}
	got, err = e.st.Breach(e.ctx, r.ID, e.breachEv(time.Second), "loop_limit_exceeded", "loop", e.at(time.Second))
	if err != nil || got.Status != runs.StatusFailed || got.ErrorCode != "loop_limit_exceeded" || !got.Wake.IsZero() {
		t.Fatalf("breach of a parked running run: %+v %v", got, err)
	}
	if types := logTypes(got); len(types) != 2 || types[0] != runs.EventNodeStarted+"@a" || types[1] != runs.EventCapBreached+"@" {
		t.Fatalf("log after the breach: %v, want the node event then cap.breached", types)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("a breached run is due: %v %v", ids, err)
	}
	if e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("a breached run is listed stale")
	}
	// The execution that held the run is refused its next append.
	if _, err := e.st.AppendLog(e.ctx, r.ID, runs.Fence{Epoch: r.Epoch, At: 1}, []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 0)}, e.now); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("append after the breach: %v, want ErrStatusConflict", err)
	}

	done := e.running(t, 0)
	if _, err := e.st.Transition(e.ctx, done.ID, live, runs.StatusCompleted, "", e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	before := e.get(t, done.ID)
	cur, err := e.st.Breach(e.ctx, done.ID, e.breachEv(2*time.Second), "run_timeout", "late", e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCompleted {
		t.Fatalf("breach of a completed run: %+v %v, want ErrStatusConflict with the run completed", cur, err)
	}
	if after := e.get(t, done.ID); after.Status != runs.StatusCompleted || after.Version != before.Version || breached(after) != 0 || after.ErrorCode != "" {
		t.Fatalf("a late breach changed a completed run: %+v", after)
	}
	if _, err := e.st.Breach(e.ctx, runs.NewRunID("acme"), e.breachEv(0), "run_timeout", "x", e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("breach of no run: %v", err)
	}
}

// raceEnds races first (racer 0) against executors breaching r's deadline
// (the other racers) and returns the run, failing the test unless exactly
// one end won (version 3); a racer's error other than ErrStatusConflict
// fails it as what.
func (e *env) raceEnds(t *testing.T, r runs.Run, what string, first func() error) runs.Run {
	t.Helper()
	wins := 0
	for _, err := range e.race(func(i int) error {
		if i == 0 {
			return first()
		}
		_, err := e.st.Breach(e.ctx, r.ID, e.breachEv(time.Second), "run_timeout", "timeout", e.at(time.Second))
		return err
	}) {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("%s: %v", what, err)
		}
	}
	got := e.get(t, r.ID)
	if wins != 1 || got.Version != 3 {
		t.Fatalf("%d racing ends won (version %d), want 1 (3)", wins, got.Version)
	}
	return got
}

// breachRace: executors racing past a deadline (and a completion racing
// them) end the run once: exactly one write wins, the log holds one
// cap.breached, one terminal version is added.
func breachRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	completed := 0
	got := e.raceEnds(t, r, "racing breach", func() error {
		_, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", e.at(time.Second))
		if err == nil {
			completed++
		}
		return err
	})
	switch {
	case completed == 1 && (got.Status != runs.StatusCompleted || breached(got) != 0):
		t.Fatalf("the completion won but the run is %+v", got)
	case completed == 0 && (got.Status != runs.StatusFailed || breached(got) != 1 || got.ErrorCode != "run_timeout"):
		t.Fatalf("a breach won but the run is %+v", got)
	}
}

// breachLostAnswer: the breach applied and its answer was lost; the call
// is answered as its write left the run (RED_TEAM 500); a later call is
// ErrStatusConflict with the run failed under the code, one event and
// one version added.
func breachLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if cur, err := e.st.Breach(e.ctx, r.ID, e.breachEv(time.Second), "run_timeout", "timeout", e.at(time.Second)); err != nil ||
		cur.Status != runs.StatusFailed || cur.ErrorCode != "run_timeout" || breached(cur) != 1 || cur.Version != 3 {
		t.Fatalf("the breach whose answer was lost: %+v %v, want the run failed, one cap.breached, version 3", cur, err)
	}
	cur, err := e.st.Breach(e.ctx, r.ID, e.breachEv(2*time.Second), "run_timeout", "timeout", e.at(2*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusFailed || cur.ErrorCode != "run_timeout" || breached(cur) != 1 || cur.Version != 3 {
		t.Fatalf("retry of an applied breach: %+v %v, want ErrStatusConflict with the run failed, one cap.breached, version 3", cur, err)
	}
}

// breachRacesCancel: executors racing past a deadline and a keyed cancel
// end the run once: exactly one write wins. A cancel that won leaves the
// run cancelled by its request (CancelledBy) with no cap.breached; a
// breach that won leaves it failed on the cap with no CancelledBy, and
// the cancel's ErrStatusConflict carries that run (so the cancel's retry
// can never claim a cancel it did not make).
func breachRacesCancel(t *testing.T, e *env) {
	r := e.running(t, 0)
	const by = "caller:v1:cancel-record"
	cancelled := false
	var lost runs.Run
	got := e.raceEnds(t, r, "racing end", func() error {
		cur, err := e.st.Cancel(e.ctx, r.ID, []runs.Status{runs.StatusPending, runs.StatusRunning}, by, "", e.at(time.Second))
		if err == nil {
			cancelled = true
		} else {
			lost = cur
		}
		return err
	})
	switch {
	case cancelled && (got.Status != runs.StatusCancelled || got.CancelledBy != by || breached(got) != 0 || got.ErrorCode != ""):
		t.Fatalf("the cancel won but the run is %+v", got)
	case !cancelled && (got.Status != runs.StatusFailed || got.CancelledBy != "" || breached(got) != 1 || got.ErrorCode != "run_timeout"):
		t.Fatalf("a breach won but the run is %+v", got)
	case !cancelled && (lost.Status != runs.StatusFailed || lost.CancelledBy != ""):
		t.Fatalf("the refused cancel was handed %+v, want the breached run", lost)
	}
}
