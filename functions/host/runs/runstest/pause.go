package runstest

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// livePaused is what a cancel moves a run from: live or paused.
var livePaused = []runs.Status{runs.StatusPending, runs.StatusRunning, runs.StatusPaused}

// pauseWith pauses run id under p at d, which must succeed.
func (e *env) pauseWith(t *testing.T, id string, p runs.Pause, d time.Duration) runs.Run {
	t.Helper()
	got, err := e.st.Pause(e.ctx, id, p, e.at(d))
	if err != nil || got.Status != runs.StatusPaused {
		t.Fatalf("pause %s: %+v %v, want paused", id, got, err)
	}
	return got
}

// appendEv appends a node event to r under its fence, which must succeed.
func (e *env) appendEv(t *testing.T, r runs.Run, typ, node string, d time.Duration) runs.Run {
	t.Helper()
	got, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(typ, node, d)}, e.at(d))
	if err != nil {
		t.Fatalf("append %s@%s: %v", typ, node, err)
	}
	return got
}

// pausePayload is a run.paused event's payload.
type pausePayload struct {
	DrainPolicy        string `json:"drainPolicy"`
	Reason             string `json:"reason"`
	InterruptedNodeID  string `json:"interruptedNodeId"`
	InterruptedAttempt int    `json:"interruptedAttempt"`
}

// count is how many events of r's log have type typ.
func count(r runs.Run, typ string) int {
	n := 0
	for _, ev := range r.Log {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// lastPause is the payload of r's last log event, which must be run.paused.
func lastPause(t *testing.T, r runs.Run) pausePayload {
	t.Helper()
	if len(r.Log) == 0 || r.Log[len(r.Log)-1].Type != runs.EventRunPaused {
		t.Fatalf("log %v does not end with run.paused", logTypes(r))
	}
	var p pausePayload
	if err := json.Unmarshal(r.Log[len(r.Log)-1].Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// pauseResumes: a pause between nodes records run.paused at once, keeps
// the epoch and takes the run out of every pass that drives it; nothing
// drives it until Unpause, which takes it (epoch + 1), records
// run.resumed and makes it live again.
func pauseResumes(t *testing.T, e *env) {
	r := e.running(t, 0)
	r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
	r = e.appendEv(t, r, runs.EventNodeCompleted, "a", 2*time.Second)
	got := e.pauseWith(t, r.ID, runs.Pause{Reason: "maintenance", By: "p1"}, 3*time.Second)
	if got.Version != r.Version+1 || got.Epoch != r.Epoch || got.PausePending != nil || got.PausedBy != "p1" || !got.UpdatedAt.Equal(e.at(3*time.Second)) {
		t.Fatalf("paused between nodes: %+v, want version %d, epoch %d, no held event, pausedBy p1", got, r.Version+1, r.Epoch)
	}
	if p := lastPause(t, got); p.DrainPolicy != runs.DrainCurrentNode || p.Reason != "maintenance" || p.InterruptedNodeID != "" {
		t.Fatalf("run.paused %+v, want the default drain policy and the reason, nothing cut", p)
	}
	if !sameRun(e.get(t, r.ID), got) {
		t.Fatalf("paused run reads back %+v, want %+v", e.get(t, r.ID), got)
	}
	if e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("a paused run is listed stale")
	}
	for name, fn := range map[string]func() error{
		"Adopt": func() error { _, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Hour)); return err },
		"Claim": func() error { _, err := e.st.Claim(e.ctx, r.ID, e.at(time.Hour), e.at(time.Hour)); return err },
		"Renew": func() error { _, err := e.st.Renew(e.ctx, r.ID, got.Epoch, e.at(time.Hour)); return err },
		"Finish": func() error {
			_, err := e.st.Finish(e.ctx, r.ID, got.Epoch, runs.StatusCompleted, "", e.at(time.Hour))
			return err
		},
		"Park": func() error {
			_, err := e.st.Park(e.ctx, r.ID, got.Epoch, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(time.Hour))
			return err
		},
		"AppendLog": func() error {
			_, err := e.st.AppendLog(e.ctx, r.ID, got.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "b", time.Hour)}, e.at(time.Hour))
			return err
		},
		"Pause":       func() error { _, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p2"}, e.at(time.Hour)); return err },
		"NoteFailure": func() error { _, err := e.st.NoteFailure(e.ctx, r.ID, "boom", e.at(time.Hour)); return err },
		"Schedule": func() error {
			return e.st.Schedule(e.ctx, r.ID, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(time.Hour))
		},
		"Resume": func() error { _, err := e.st.Resume(e.ctx, r.ID, e.at(time.Hour)); return err },
		"Breach": func() error {
			_, err := e.st.Breach(e.ctx, r.ID, e.breachEv(time.Hour), "run_timeout", "timeout", e.at(time.Hour))
			return err
		},
	} {
		if err := fn(); !errors.Is(err, runs.ErrStatusConflict) {
			t.Errorf("%s of a paused run: %v, want ErrStatusConflict", name, err)
		}
	}
	if cur := e.get(t, r.ID); cur.Version != got.Version || cur.Epoch != got.Epoch || len(cur.Log) != len(got.Log) {
		t.Fatalf("refused writes changed the paused run: %+v", cur)
	}
	// The same pause again (its answer lost) is its own.
	if again, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p1"}, e.at(4*time.Second)); err != nil || again.Version != got.Version {
		t.Fatalf("the same pause again: %+v %v, want the run as paused and no error", again, err)
	}
	res, err := e.st.Unpause(e.ctx, r.ID, "r1", "done", e.at(5*time.Second))
	if err != nil || res.Status != runs.StatusRunning || res.Epoch != got.Epoch+1 || res.Version != got.Version+1 || res.ResumedBy != "r1" {
		t.Fatalf("resume: %+v %v, want running, epoch %d, version %d", res, err, got.Epoch+1, got.Version+1)
	}
	if last := res.Log[len(res.Log)-1]; last.Type != runs.EventRunResumed || string(last.Payload) != `{"reason":"done"}` {
		t.Fatalf("resume's event %s %s, want run.resumed {reason}", last.Type, last.Payload)
	}
	if !e.stale(t, e.at(time.Hour), r.ID) {
		t.Fatal("a resumed run is not live again (Stale)")
	}
	if _, err := e.st.Adopt(e.ctx, r.ID, e.at(6*time.Second)); err != nil {
		t.Fatalf("adopt the resumed run: %v", err)
	}
	if _, err := e.st.Unpause(e.ctx, r.ID, "r2", "", e.at(7*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("resume of a running run: %v, want ErrStatusConflict", err)
	}
	if again, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(7*time.Second)); err != nil || again.Status != runs.StatusRunning {
		t.Fatalf("the same resume again: %+v %v, want the run and no error", again, err)
	}
}

// pauseDrain: a drain-current-node pause while a node runs holds its
// run.paused; the execution keeps its claim (renews), appends the node's
// terminal event with run.paused after it in one write, and then starts
// nothing.
func pauseDrain(t *testing.T, e *env) {
	r := e.running(t, 0)
	r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
	got := e.pauseWith(t, r.ID, runs.Pause{Drain: runs.DrainCurrentNode, By: "p1"}, 2*time.Second)
	if got.PausePending == nil || len(got.Log) != 1 || got.Epoch != r.Epoch {
		t.Fatalf("drain pause: %+v, want run.paused held, the log and epoch unchanged", got)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(3*time.Second)); err != nil {
		t.Fatalf("the draining execution's renewal: %v", err)
	}
	// Another node's start is refused while draining.
	if _, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "b", 4*time.Second)}, e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a node start while draining: %v, want ErrStatusConflict", err)
	}
	// The node's end from an execution of another epoch (one whose claim
	// was taken over) does not end the drain.
	stale := r.Fence()
	stale.Epoch--
	if _, err := e.st.AppendLog(e.ctx, r.ID, stale, []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the drained node's end under another epoch: %v, want ErrStatusConflict", err)
	}
	if got := e.get(t, r.ID); got.PausePending == nil || len(got.Log) != 1 {
		t.Fatalf("after the drained node's end under another epoch: %+v, want run.paused still held, the log unchanged", got)
	}
	d, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 5*time.Second)}, e.at(5*time.Second))
	if err != nil || d.Status != runs.StatusPaused || d.PausePending != nil {
		t.Fatalf("the drained node's end: %+v %v, want appended, paused, nothing held", d, err)
	}
	if got := logTypes(d); len(got) != 3 || got[1] != "node.completed@a" || got[2] != "run.paused@" {
		t.Fatalf("log %v, want node.started, node.completed, run.paused", got)
	}
	if p := lastPause(t, d); p.DrainPolicy != runs.DrainCurrentNode || !d.Log[2].At.Equal(e.at(5*time.Second)) {
		t.Fatalf("run.paused %+v at %v, want drain-current-node at the node's end", p, d.Log[2].At)
	}
	if !sameRun(e.get(t, r.ID), d) {
		t.Fatalf("drained run reads back %+v, want %+v", e.get(t, r.ID), d)
	}
	if _, err := e.st.AppendLog(e.ctx, r.ID, d.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "b", 6*time.Second)}, e.at(6*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the next node's start after the drain: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(7*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a renewal after the drain: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Finish(e.ctx, r.ID, r.Epoch, runs.StatusCompleted, "", e.at(7*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the drained execution's end: %v, want ErrStatusConflict (the run stays paused)", err)
	}
	res, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(8*time.Second))
	if err != nil || res.Epoch != r.Epoch+1 || count(res, runs.EventRunPaused) != 1 || res.Log[len(res.Log)-1].Type != runs.EventRunResumed {
		t.Fatalf("resume after the drain: %+v %v", res, err)
	}
}

// pauseImmediate: an immediate pause while a node runs cuts its attempt:
// the epoch moves on (the execution writes nothing more), run.paused
// names the node and attempt, and the node is no longer open.
func pauseImmediate(t *testing.T, e *env) {
	r := e.running(t, 0)
	r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
	got := e.pauseWith(t, r.ID, runs.Pause{Drain: runs.DrainImmediate, Reason: "now", By: "p1"}, 2*time.Second)
	if got.Epoch != r.Epoch+1 || got.PausePending != nil {
		t.Fatalf("immediate pause: %+v, want epoch %d, nothing held", got, r.Epoch+1)
	}
	if p := lastPause(t, got); p.DrainPolicy != runs.DrainImmediate || p.InterruptedNodeID != "a" || p.InterruptedAttempt != 1 || p.Reason != "now" {
		t.Fatalf("run.paused %+v, want immediate, node a attempt 1 cut", p)
	}
	if n, _ := runs.OpenNode(got.Log); n != "" {
		t.Fatalf("node %q still open after the cut", n)
	}
	for name, fn := range map[string]func() error{
		"AppendLog": func() error {
			_, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 3*time.Second)}, e.at(3*time.Second))
			return err
		},
		"Renew": func() error { _, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(3*time.Second)); return err },
	} {
		if err := fn(); !errors.Is(err, runs.ErrStatusConflict) {
			t.Errorf("the cut execution's %s: %v, want ErrStatusConflict", name, err)
		}
	}
	if cur := e.get(t, r.ID); count(cur, runs.EventNodeCompleted) != 0 || len(cur.Log) != 2 {
		t.Fatalf("log after the cut %v, want node.started, run.paused", logTypes(cur))
	}
	res, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(4*time.Second))
	if err != nil || res.Epoch != r.Epoch+2 {
		t.Fatalf("resume after the cut: %+v %v", res, err)
	}
	// The resumed execution starts the node afresh: attempt 2.
	res = e.appendEv(t, res, runs.EventNodeStarted, "a", 5*time.Second)
	if n, a := runs.OpenNode(res.Log); n != "a" || a != 2 {
		t.Fatalf("open node after the fresh start %q attempt %d, want a attempt 2", n, a)
	}
}

// pauseUndrainedResume: a resume before the node drained records the
// held run.paused, then run.resumed, and fences the draining execution.
func pauseUndrainedResume(t *testing.T, e *env) {
	r := e.running(t, 0)
	r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
	e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, 2*time.Second)
	res, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(3*time.Second))
	if err != nil || res.PausePending != nil || res.Epoch != r.Epoch+1 {
		t.Fatalf("resume before the drain: %+v %v", res, err)
	}
	if got := logTypes(res); len(got) != 3 || got[1] != "run.paused@" || got[2] != "run.resumed@" {
		t.Fatalf("log %v, want node.started, run.paused, run.resumed", got)
	}
	if _, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the draining execution's late end: %v, want ErrStatusConflict (fenced)", err)
	}
}

// pauseParked: pausing a parked run clears its wake (no due pass takes
// it); a pending run pauses too.
func pauseParked(t *testing.T, e *env) {
	r := e.running(t, 0)
	if _, err := e.st.Park(e.ctx, r.ID, r.Epoch, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.now); err != nil {
		t.Fatal(err)
	}
	got := e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, time.Second)
	if !got.Wake.IsZero() {
		t.Fatalf("paused parked run keeps its wake %+v", got.Wake)
	}
	if ids, err := e.st.Due(e.ctx, e.at(time.Hour), 0); err != nil || len(ids) != 0 {
		t.Fatalf("a paused run is due: %v %v", ids, err)
	}
	if _, err := e.st.Resume(e.ctx, r.ID, e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a due pass takes a paused run: %v", err)
	}
	p := e.newRun(t, 0)
	if got := e.pauseWith(t, p.ID, runs.Pause{By: "p2"}, time.Second); got.Epoch != 0 {
		t.Fatalf("paused pending run: %+v", got)
	}
	if _, err := e.st.Transition(e.ctx, p.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(2*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("an executor starts a paused run: %v", err)
	}
}

// pauseRefused: an ended run is not paused nor resumed; a missing one is
// ErrRunNotFound; a cancel ends a paused run, which then stays ended.
func pauseRefused(t *testing.T, e *env) {
	if _, err := e.st.Pause(e.ctx, runs.NewRunID("acme"), runs.Pause{}, e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("pause of no run: %v", err)
	}
	if _, err := e.st.Unpause(e.ctx, runs.NewRunID("acme"), "", "", e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("resume of no run: %v", err)
	}
	done := e.running(t, 0)
	if _, err := e.st.Finish(e.ctx, done.ID, done.Epoch, runs.StatusCompleted, "", e.now); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Pause(e.ctx, done.ID, runs.Pause{By: "p1"}, e.now); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCompleted {
		t.Fatalf("pause of a completed run: %+v %v", cur, err)
	}
	r := e.running(t, 0)
	e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, time.Second)
	c, err := e.st.Cancel(e.ctx, r.ID, livePaused, "c1", "stop", e.at(2*time.Second))
	if err != nil || c.Status != runs.StatusCancelled {
		t.Fatalf("cancel of a paused run: %+v %v", c, err)
	}
	if cur, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(3*time.Second)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCancelled {
		t.Fatalf("resume of a cancelled run: %+v %v", cur, err)
	}
	// A run cancelled while its node drains keeps its held run.paused.
	d := e.running(t, 0)
	d = e.appendEv(t, d, runs.EventNodeStarted, "a", time.Second)
	e.pauseWith(t, d.ID, runs.Pause{By: "p1"}, 2*time.Second)
	if c, err := e.st.Cancel(e.ctx, d.ID, livePaused, "c1", "", e.at(3*time.Second)); err != nil || c.PausePending == nil {
		t.Fatalf("cancel while draining: %+v %v, want cancelled, run.paused still held", c, err)
	}
	if got := e.get(t, d.ID); got.Status != runs.StatusCancelled || got.PausePending == nil || got.PausePending.Type != runs.EventRunPaused {
		t.Fatalf("read back: %+v, want cancelled holding run.paused", got)
	}
	if _, err := e.st.AppendLog(e.ctx, d.ID, d.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the drain's end after the cancel: %v, want ErrStatusConflict", err)
	}
}

// pauseRace: of racing pauses exactly one writes.
func pauseRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	wins := 0
	for _, err := range e.race(func(i int) error {
		_, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p" + strconv.Itoa(i)}, e.now)
		return err
	}) {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("racing pause: %v", err)
		}
	}
	if got := e.get(t, r.ID); wins != 1 || got.Version != r.Version+1 || count(got, runs.EventRunPaused) != 1 {
		t.Fatalf("%d racing pauses won (version %d, log %v), want 1", wins, got.Version, logTypes(got))
	}
}

// pauseRacesCompletion: a pause racing the execution's last node end and
// its Finish: either the run completed and was never paused, or it is
// paused with the node's end recorded before run.paused, never both.
func pauseRacesCompletion(t *testing.T, e *env) {
	for range 4 {
		r := e.running(t, 0)
		r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
		errs := e.race(func(i int) error {
			if i == 0 {
				cur, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 2*time.Second)}, e.at(2*time.Second))
				if err != nil {
					return err
				}
				_, err = e.st.Finish(e.ctx, r.ID, cur.Epoch, runs.StatusCompleted, "", e.at(3*time.Second))
				return err
			}
			_, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p" + strconv.Itoa(i)}, e.at(2*time.Second))
			return err
		})
		got := e.get(t, r.ID)
		switch got.Status {
		case runs.StatusCompleted:
			if count(got, runs.EventRunPaused) != 0 || errs[0] != nil {
				t.Fatalf("completed run with log %v (executor %v)", logTypes(got), errs[0])
			}
		case runs.StatusPaused:
			types := logTypes(got)
			if len(types) != 3 || types[1] != "node.completed@a" || types[2] != "run.paused@" || got.PausePending != nil {
				t.Fatalf("paused run with log %v, want node.started, node.completed, run.paused", types)
			}
		default:
			t.Fatalf("run %s after the race, want completed or paused", got.Status)
		}
	}
}

// pauseRacesCancel: pauses racing cancels of one run: the run ends
// cancelled, whichever came first.
func pauseRacesCancel(t *testing.T, e *env) {
	r := e.running(t, 0)
	for _, err := range e.race(func(i int) error {
		var err error
		if i%2 == 0 {
			_, err = e.st.Cancel(e.ctx, r.ID, livePaused, "c"+strconv.Itoa(i), "", e.now)
		} else {
			_, err = e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p" + strconv.Itoa(i)}, e.now)
		}
		if errors.Is(err, runs.ErrStatusConflict) {
			return nil
		}
		return err
	}) {
		if err != nil {
			t.Fatalf("racing pause and cancel: %v", err)
		}
	}
	if got := e.get(t, r.ID); got.Status != runs.StatusCancelled || count(got, runs.EventRunPaused) > 1 {
		t.Fatalf("after pauses raced cancels: %s, log %v, want cancelled", got.Status, logTypes(got))
	}
}

// resumeRacesCancel: resumes racing cancels of a paused run: the run
// ends cancelled, never resurrected running.
func resumeRacesCancel(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.pauseWith(t, r.ID, runs.Pause{By: "p"}, 0)
	for _, err := range e.race(func(i int) error {
		var err error
		if i%2 == 0 {
			_, err = e.st.Cancel(e.ctx, r.ID, livePaused, "c"+strconv.Itoa(i), "", e.now)
		} else {
			_, err = e.st.Unpause(e.ctx, r.ID, "r"+strconv.Itoa(i), "", e.now)
		}
		if errors.Is(err, runs.ErrStatusConflict) {
			return nil
		}
		return err
	}) {
		if err != nil {
			t.Fatalf("racing resume and cancel: %v", err)
		}
	}
	if got := e.get(t, r.ID); got.Status != runs.StatusCancelled || count(got, runs.EventRunResumed) > 1 {
		t.Fatalf("after resumes raced cancels: %s, log %v, want cancelled", got.Status, logTypes(got))
	}
}

// pauseLostAnswer: a pause and a resume whose answers are lost are
// retried (by the store, or by the caller with the same By) and are each
// applied once.
func pauseLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if got, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p1"}, e.now); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("pause, answer lost: %+v %v", got, err)
	}
	got, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p1"}, e.now)
	if err != nil || got.Status != runs.StatusPaused || got.Version != r.Version+1 || count(got, runs.EventRunPaused) != 1 {
		t.Fatalf("the pause's retry: %+v %v, want paused once", got, err)
	}
	e.lose("UpdateItem")
	if res, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(time.Second)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("resume, answer lost: %+v %v", res, err)
	}
	res, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(time.Second))
	if err != nil || res.Status != runs.StatusRunning || res.Version != r.Version+2 || count(res, runs.EventRunResumed) != 1 || res.Epoch != r.Epoch+1 {
		t.Fatalf("the resume's retry: %+v %v, want running once", res, err)
	}
}

// pauseLostAnswerNoWriter: a pause and a resume that name no writer (no
// By the store could find its own write by), whose answers are lost, are
// each answered as their write left the run and applied once (RED_TEAM
// 500).
func pauseLostAnswerNoWriter(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	got, err := e.st.Pause(e.ctx, r.ID, runs.Pause{}, e.now)
	if err != nil || got.Status != runs.StatusPaused || got.Version != r.Version+1 || count(got, runs.EventRunPaused) != 1 {
		t.Fatalf("pause, answer lost: %s %v, want paused once", got.Status, err)
	}
	e.lose("UpdateItem")
	res, err := e.st.Unpause(e.ctx, r.ID, "", "", e.at(time.Second))
	if err != nil || res.Status != runs.StatusRunning || res.Version != r.Version+2 || count(res, runs.EventRunResumed) != 1 || res.Epoch != r.Epoch+1 {
		t.Fatalf("resume, answer lost: %s %v, want running once", res.Status, err)
	}
}

// pauseRetryAfterResume: a pause whose first execution applied (its
// answer lost, its Idempotency-Key's record never written) and whose
// retry comes after another request resumed the run does not pause the
// run a second time; nor does such a retry of a resume after another
// request paused the run again. Each request is applied once.
func pauseRetryAfterResume(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, time.Second)
	if _, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p1"}, e.at(3*time.Second))
	if err != nil || count(e.get(t, r.ID), runs.EventRunPaused) != 1 || e.get(t, r.ID).Status != runs.StatusRunning {
		cur := e.get(t, r.ID)
		t.Fatalf("the first pause's retry after a resume: %s %v, log %v; want its own pause found, the run left running", got.Status, err, logTypes(cur))
	}
	e.pauseWith(t, r.ID, runs.Pause{By: "p2"}, 4*time.Second)
	got, err = e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(5*time.Second))
	if err != nil || count(e.get(t, r.ID), runs.EventRunResumed) != 1 || e.get(t, r.ID).Status != runs.StatusPaused {
		cur := e.get(t, r.ID)
		t.Fatalf("the first resume's retry after another pause: %s %v, log %v; want its own resume found, the run left paused", got.Status, err, logTypes(cur))
	}
}

// pauseNodeNotDraining: a pause (drain-current-node) of a run whose open
// node will not drain records its run.paused at once, not held until a
// resume: a run parked mid-node (no execution under way), and a run
// whose execution, draining, parks it (its effect to be tried later: the
// park is refused, the held run.paused is appended). Either way the run
// stays paused with no wake, and its resume records run.resumed once
// after the one run.paused.
func pauseNodeNotDraining(t *testing.T, e *env) {
	r := e.running(t, 0)
	r = e.appendEv(t, r, runs.EventNodeStarted, "a", time.Second)
	if _, err := e.st.Park(e.ctx, r.ID, r.Epoch, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(time.Second)); err != nil {
		t.Fatal(err)
	}
	got := e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, 2*time.Second)
	if got.PausePending != nil || !slices.Equal(logTypes(got), []string{"node.started@a", "run.paused@"}) {
		t.Fatalf("pause of a run parked mid-node: held %v, log %v; want run.paused in the log at once", got.PausePending != nil, logTypes(got))
	}
	d := e.running(t, 0)
	d = e.appendEv(t, d, runs.EventNodeStarted, "a", time.Second)
	if held := e.pauseWith(t, d.ID, runs.Pause{By: "p1"}, 2*time.Second); held.PausePending == nil {
		t.Fatalf("pause while a node executes: %+v, want run.paused held", held)
	}
	if cur, err := e.st.Park(e.ctx, d.ID, d.Epoch, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(3*time.Second)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusPaused {
		t.Fatalf("the draining execution's park: %s %v, want refused (paused)", cur.Status, err)
	}
	got = e.get(t, d.ID)
	if got.Status != runs.StatusPaused || got.PausePending != nil || !got.Wake.IsZero() || !slices.Equal(logTypes(got), []string{"node.started@a", "run.paused@"}) {
		t.Fatalf("after the draining execution parked: %s, held %v, wake %+v, log %v; want paused, run.paused in the log, no wake",
			got.Status, got.PausePending != nil, got.Wake, logTypes(got))
	}
	res, err := e.st.Unpause(e.ctx, d.ID, "r1", "", e.at(4*time.Second))
	if err != nil || !slices.Equal(logTypes(res), []string{"node.started@a", "run.paused@", "run.resumed@"}) {
		t.Fatalf("resume: %v, log %v", err, logTypes(res))
	}
	// A park under an epoch the run no longer has releases nothing.
	o := e.running(t, 0)
	o = e.appendEv(t, o, runs.EventNodeStarted, "a", time.Second)
	e.pauseWith(t, o.ID, runs.Pause{By: "p1"}, 2*time.Second)
	if _, err := e.st.Park(e.ctx, o.ID, o.Epoch+1, runs.Wake{At: e.at(time.Minute), Attempt: 1, MaxAttempts: 3}, e.at(3*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("park under another epoch: %v", err)
	}
	if got := e.get(t, o.ID); got.PausePending == nil || count(got, runs.EventRunPaused) != 0 {
		t.Fatalf("a park under another epoch released the held run.paused: log %v", logTypes(got))
	}
}

// pauseLimit: a run paused and resumed until its pauses' bound
// (runs.MaxPauses, or their reasons' bytes) refuses the next pause with
// ErrPauseLimit, changing nothing, before its item nears the 400 KB
// DynamoDB refuses: it is still resumed and cancelled (RED_TEAM 378).
func pauseLimit(t *testing.T, e *env) {
	r := e.running(t, 0)
	reason := strings.Repeat("\U0001F600", 1024) // 4 KB each, the most a reason holds
	i := 0
	for ; i <= runs.MaxPauses; i++ {
		_, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "p" + strconv.Itoa(i), Reason: reason}, e.now)
		if errors.Is(err, runs.ErrPauseLimit) {
			break
		}
		if err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if _, err := e.st.Unpause(e.ctx, r.ID, "r"+strconv.Itoa(i), reason, e.now); err != nil {
			t.Fatalf("resume %d: %v", i, err)
		}
	}
	if i == 0 || i > runs.MaxPauses {
		t.Fatalf("%d pauses with the longest reasons, none refused ErrPauseLimit", i)
	}
	before := e.get(t, r.ID)
	if cur, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: "again"}, e.now); !errors.Is(err, runs.ErrPauseLimit) || cur.Status != runs.StatusRunning {
		t.Fatalf("a pause past the bound: %s %v, want ErrPauseLimit with the run", cur.Status, err)
	}
	if got := e.get(t, r.ID); got.Version != before.Version || len(got.Log) != len(before.Log) {
		t.Fatalf("a refused pause changed the run: version %d -> %d", before.Version, got.Version)
	}
	if c, err := e.st.Cancel(e.ctx, r.ID, livePaused, "c1", reason, e.now); err != nil || c.Status != runs.StatusCancelled {
		t.Fatalf("cancel after the bound: %+v %v", c.Status, err)
	}
}

// sameRun reports whether a and b are the same run as a pause leaves it:
// status, version, epoch, log, held event and pausedBy.
func sameRun(a, b runs.Run) bool {
	return a.Status == b.Status && a.Version == b.Version && a.Epoch == b.Epoch && a.PausedBy == b.PausedBy &&
		(a.PausePending == nil) == (b.PausePending == nil) && slices.Equal(logTypes(a), logTypes(b)) && a.UpdatedAt.Equal(b.UpdatedAt)
}

// errRefused is the suite's guard refusal.
var errRefused = errors.New("runstest: the guard refused the run")

// guarded is the store as a GuardedPauseStore (every store of this
// repository is one); a store that is not skips the guarded cases.
func (e *env) guarded(t *testing.T) runs.GuardedPauseStore {
	t.Helper()
	g, ok := e.st.(runs.GuardedPauseStore)
	if !ok {
		t.Skip("the store takes no guard (not a runs.GuardedPauseStore)")
	}
	return g
}

// statusSince is the guard of a write decided against version v: it
// refuses a run whose status changed since v (errRefused), and a version
// the run never had.
func statusSince(v int64) runs.Guard {
	return func(r runs.Run) error {
		changes, err := r.ChangesSince(v)
		if err != nil {
			return err
		}
		for _, c := range changes {
			if c.Field == runs.FieldStatus {
				return errRefused
			}
		}
		return nil
	}
}

// pauseGuarded: a guarded pause and resume are refused with the guard's
// error, the run unchanged, when the guard refuses the run as read (it is
// handed the run as stored), and apply as Pause and Unpause when it
// passes; the guard is checked before the status (a refused guard on a
// run the write would refuse anyway is the guard's error); a retry of a
// guarded write that applied finds its own write and is not guarded.
func pauseGuarded(t *testing.T, e *env) {
	g := e.guarded(t)
	r := e.running(t, 0)
	var saw runs.Run
	refuse := func(cur runs.Run) error { saw = cur; return errRefused }
	got, err := g.PauseGuarded(e.ctx, r.ID, runs.Pause{By: "p1"}, refuse, e.at(time.Second))
	if !errors.Is(err, errRefused) || got.Version != r.Version || got.Status != runs.StatusRunning || saw.Version != r.Version || saw.ID != r.ID {
		t.Fatalf("refused guarded pause: %s at %d %v (guard saw version %d), want the guard's error, the run as read", got.Status, got.Version, err, saw.Version)
	}
	if cur := e.get(t, r.ID); cur.Version != r.Version || cur.Status != runs.StatusRunning || count(cur, runs.EventRunPaused) != 0 {
		t.Fatalf("the refused pause wrote the run: %s at %d, log %v", cur.Status, cur.Version, logTypes(cur))
	}
	if _, err := g.UnpauseGuarded(e.ctx, r.ID, "r0", "", refuse, e.at(time.Second)); !errors.Is(err, errRefused) {
		t.Fatalf("guarded resume of a running run: %v, want the guard's error before the status", err)
	}
	p, err := g.PauseGuarded(e.ctx, r.ID, runs.Pause{By: "p1", Reason: "decided"}, statusSince(r.Version), e.at(2*time.Second))
	if err != nil || p.Status != runs.StatusPaused || p.Version != r.Version+1 || lastPause(t, p).Reason != "decided" {
		t.Fatalf("guarded pause passing its guard: %s at %d %v", p.Status, p.Version, err)
	}
	if again, err := g.PauseGuarded(e.ctx, r.ID, runs.Pause{By: "p1"}, refuse, e.at(3*time.Second)); err != nil || again.Version != p.Version {
		t.Fatalf("the guarded pause's retry: %s at %d %v, want its own pause found, unguarded", again.Status, again.Version, err)
	}
	if _, err := g.UnpauseGuarded(e.ctx, r.ID, "r1", "", statusSince(r.Version), e.at(3*time.Second)); !errors.Is(err, errRefused) {
		t.Fatalf("a resume decided before the pause: %v, want refused", err)
	}
	res, err := g.UnpauseGuarded(e.ctx, r.ID, "r1", "go", statusSince(p.Version), e.at(4*time.Second))
	if err != nil || res.Status != runs.StatusRunning || res.Version != p.Version+1 || count(res, runs.EventRunResumed) != 1 {
		t.Fatalf("guarded resume passing its guard: %s at %d %v", res.Status, res.Version, err)
	}
	if again, err := g.UnpauseGuarded(e.ctx, r.ID, "r1", "go", refuse, e.at(5*time.Second)); err != nil || again.Version != res.Version {
		t.Fatalf("the guarded resume's retry: %s at %d %v, want its own resume found, unguarded", again.Status, again.Version, err)
	}
	if _, err := g.PauseGuarded(e.ctx, r.ID, runs.Pause{By: "p2"}, statusSince(res.Version+5), e.at(6*time.Second)); err == nil || errors.Is(err, errRefused) {
		t.Fatalf("a pause decided against a version the run never had: %v, want the guard's version error", err)
	}
}

// pauseGuardedRace: a pause decided against the run's version v, guarded
// on the status not having changed since, races other requests' pauses
// and resumes of the run: it applies only as the run's first change after
// v (version v+1), never after another request moved the status, whose
// change it would not have seen. The resume decided against a paused
// version likewise.
func pauseGuardedRace(t *testing.T, e *env) {
	g := e.guarded(t)
	for round := range 2 {
		r := e.running(t, 0)
		var won runs.Run
		errs := e.race(func(i int) error {
			if i == 0 {
				got, err := g.PauseGuarded(e.ctx, r.ID, runs.Pause{By: "decided"}, statusSince(r.Version), e.at(time.Second))
				won = got
				return err
			}
			by := "o" + strconv.Itoa(i)
			if _, err := e.st.Pause(e.ctx, r.ID, runs.Pause{By: by}, e.at(time.Second)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
				return err
			}
			if _, err := e.st.Unpause(e.ctx, r.ID, by, "", e.at(time.Second)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
				return err
			}
			return nil
		})
		for i, err := range errs[1:] {
			if err != nil {
				t.Fatalf("round %d: racer %d: %v", round, i+1, err)
			}
		}
		switch {
		case errs[0] == nil:
			if won.Version != r.Version+1 || won.PausedBy != "decided" {
				t.Fatalf("round %d: the decided pause applied at version %d, want %d (the first change after its decision)", round, won.Version, r.Version+1)
			}
		case !errors.Is(errs[0], errRefused):
			t.Fatalf("round %d: the decided pause: %v", round, errs[0])
		}
		// The resume decided against a paused version.
		p := e.pauseWith(t, e.running(t, 0).ID, runs.Pause{By: "p"}, time.Second)
		errs = e.race(func(i int) error {
			if i == 0 {
				got, err := g.UnpauseGuarded(e.ctx, p.ID, "decided", "", statusSince(p.Version), e.at(2*time.Second))
				won = got
				return err
			}
			by := "o" + strconv.Itoa(i)
			if _, err := e.st.Unpause(e.ctx, p.ID, by, "", e.at(2*time.Second)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
				return err
			}
			if _, err := e.st.Pause(e.ctx, p.ID, runs.Pause{By: by}, e.at(2*time.Second)); err != nil && !errors.Is(err, runs.ErrStatusConflict) {
				return err
			}
			return nil
		})
		for i, err := range errs[1:] {
			if err != nil {
				t.Fatalf("round %d: resume racer %d: %v", round, i+1, err)
			}
		}
		switch {
		case errs[0] == nil:
			if won.Version != p.Version+1 || won.ResumedBy != "decided" {
				t.Fatalf("round %d: the decided resume applied at version %d, want %d", round, won.Version, p.Version+1)
			}
		case !errors.Is(errs[0], errRefused):
			t.Fatalf("round %d: the decided resume: %v", round, errs[0])
		}
	}
}

// cancelAt: a cancel conditional on the run's version (VersionCanceller)
// cancels a pending, running or paused run still at that version, with its
// by and reason; it is refused (ErrStatusConflict, the run as it is,
// nothing written) once the version moved on, also when a pause and a
// resume left the status as it was read, and for an ended run; no run is
// ErrRunNotFound. Its write's lost answer is answered consistently: the
// run cancelled by it.
func cancelAt(t *testing.T, e *env) {
	ca, ok := e.st.(runs.VersionCanceller)
	if !ok {
		t.Skip("the store takes no versioned cancel (not a runs.VersionCanceller)")
	}
	if _, err := ca.CancelAt(e.ctx, runs.NewRunID("acme"), 1, "c0", "", e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("versioned cancel of no run: %v", err)
	}
	r := e.running(t, 0)
	v := r.Version
	e.pauseWith(t, r.ID, runs.Pause{By: "p1"}, time.Second)
	if _, err := e.st.Unpause(e.ctx, r.ID, "r1", "", e.at(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	cur, err := ca.CancelAt(e.ctx, r.ID, v, "c1", "stale", e.at(3*time.Second))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusRunning || cur.Version != v+2 {
		t.Fatalf("versioned cancel after a pause and a resume: %s at %d %v, want refused, the run running at %d", cur.Status, cur.Version, err, v+2)
	}
	if got := e.get(t, r.ID); got.Status != runs.StatusRunning || got.Version != v+2 || got.CancelledBy != "" {
		t.Fatalf("the refused cancel wrote the run: %+v", got)
	}
	e.lose("UpdateItem")
	got, err := ca.CancelAt(e.ctx, r.ID, v+2, "c2", "now", e.at(4*time.Second))
	if err != nil && !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("versioned cancel at the current version: %v", err)
	}
	if got = e.get(t, r.ID); got.Status != runs.StatusCancelled || got.CancelledBy != "c2" || got.CancelReason != "now" || got.Version != v+3 {
		t.Fatalf("versioned cancel at the current version: %s by %q (%q) at %d, want cancelled by c2 at %d", got.Status, got.CancelledBy, got.CancelReason, got.Version, v+3)
	}
	if cur, err := ca.CancelAt(e.ctx, r.ID, got.Version, "c3", "", e.at(5*time.Second)); !errors.Is(err, runs.ErrStatusConflict) || cur.CancelledBy != "c2" {
		t.Fatalf("versioned cancel of a cancelled run: %s by %q %v", cur.Status, cur.CancelledBy, err)
	}
	p := e.pauseWith(t, e.running(t, 0).ID, runs.Pause{By: "p"}, time.Second)
	if c, err := ca.CancelAt(e.ctx, p.ID, p.Version, "c4", "", e.at(2*time.Second)); err != nil || c.Status != runs.StatusCancelled {
		t.Fatalf("versioned cancel of a paused run: %s %v", c.Status, err)
	}
}
