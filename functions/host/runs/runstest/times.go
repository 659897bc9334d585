package runstest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// fraction is a fraction of a millisecond: every time the times case hands a
// store is this far past a whole millisecond.
const fraction = 456_789 * time.Nanosecond

// fine is the suite's time d after its origin, a fraction of a
// millisecond past it.
func (e *env) fine(d time.Duration) time.Time { return e.at(d).Add(fraction) }

// checkTimes fails unless every time of r (createdAt, updatedAt, the node
// events', the wake's) is a whole millisecond and the run the store
// returned reads back with the same times.
func (e *env) checkTimes(t *testing.T, what string, r runs.Run) {
	t.Helper()
	whole := func(ts time.Time) bool { return ts.Equal(ts.Truncate(time.Millisecond)) }
	read := e.get(t, r.ID)
	for _, x := range []struct {
		name string
		run  runs.Run
	}{{"returned", r}, {"read back", read}} {
		times := map[string]time.Time{"createdAt": x.run.CreatedAt, "updatedAt": x.run.UpdatedAt, "wake.at": x.run.Wake.At}
		for i, ev := range x.run.Log {
			times[fmt.Sprintf("log[%d].at", i)] = ev.At
		}
		for name, ts := range times {
			if !whole(ts) {
				t.Errorf("%s: the run %s has %s %s: a store keeps times to the millisecond, as RunsTable does", what, x.name, name, ts.Format(time.RFC3339Nano))
			}
		}
	}
	if !r.UpdatedAt.Equal(read.UpdatedAt) || !r.CreatedAt.Equal(read.CreatedAt) || len(r.Log) != len(read.Log) {
		t.Errorf("%s: returned updatedAt %s createdAt %s (%d events), read back %s %s (%d)", what,
			r.UpdatedAt.Format(time.RFC3339Nano), r.CreatedAt.Format(time.RFC3339Nano), len(r.Log),
			read.UpdatedAt.Format(time.RFC3339Nano), read.CreatedAt.Format(time.RFC3339Nano), len(read.Log))
	}
}

// timesMillisecond: every time a store is handed a fraction of a
// millisecond past a whole one (a run's createdAt and updatedAt at
// Create, each write's now, a node event's and a cap.breached event's
// time, a wake) is kept to the millisecond, as RunsTable keeps them, in
// the run a write returns and in the run read back alike; a node-log
// append retried after a lost answer is still recognised as applied.
func timesMillisecond(t *testing.T, e *env) {
	r := runs.NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), e.fine(0))
	r.CreatedAt, r.UpdatedAt = e.fine(0), e.fine(0)
	if err := e.st.Create(e.ctx, r); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "create", e.get(t, r.ID))
	got, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.fine(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "transition", got)
	started := []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "a", At: e.fine(2 * time.Second), Payload: json.RawMessage(`{"nodeId":"a"}`)}}
	fence := got.Fence()
	if got, err = e.st.AppendLog(e.ctx, r.ID, fence, started, e.fine(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "append", got)
	if _, err := e.st.AppendLog(e.ctx, r.ID, fence, started, e.fine(2*time.Second)); err != nil {
		t.Errorf("the same append again (a retry after a lost answer): %v, want it recognised as applied", err)
	}
	if got, err = e.st.Renew(e.ctx, r.ID, got.Epoch, e.fine(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "renew", got)
	if _, err := e.st.NoteFailure(e.ctx, r.ID, "boom", e.fine(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "note failure", e.get(t, r.ID))
	if got, err = e.st.Park(e.ctx, r.ID, got.Epoch, runs.Wake{At: e.fine(5 * time.Second), Attempt: 1, MaxAttempts: 3}, e.fine(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "park", got)
	if got, err = e.st.Resume(e.ctx, r.ID, e.fine(6*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "resume", got)
	if got, err = e.st.Adopt(e.ctx, r.ID, e.fine(7*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "adopt", got)
	if got, err = e.st.Claim(e.ctx, r.ID, e.at(time.Hour), e.fine(8*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "claim", got)
	if got, err = e.st.Finish(e.ctx, r.ID, got.Epoch, runs.StatusCompleted, "", e.fine(9*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "finish", got)

	b := e.newRun(t, 0)
	if got, err = e.st.Breach(e.ctx, b.ID, runs.LogEvent{Type: runs.EventCapBreached, At: e.fine(time.Second),
		Payload: json.RawMessage(`{"kind":"run-duration","limit":1000,"observed":1000}`)}, "run_timeout", "timed out", e.fine(time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "breach", got)
	c := e.newRun(t, 0)
	if got, err = e.st.Cancel(e.ctx, c.ID, live, "once:x", "", e.fine(time.Second)); err != nil {
		t.Fatal(err)
	}
	e.checkTimes(t, "cancel", got)
}
