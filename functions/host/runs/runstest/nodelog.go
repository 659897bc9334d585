package runstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

func appendFenced(t *testing.T, e *env) {
	pending := e.newRun(t, 0)
	if _, err := e.st.AppendLog(e.ctx, pending.ID, pending.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}, e.now); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("an append to a pending run: %v, want ErrStatusConflict", err)
	}
	r := e.running(t, 0)
	f := r.Fence()
	got, err := e.st.AppendLog(e.ctx, r.ID, f, []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", time.Second)}, e.at(time.Second))
	if err != nil || len(got.Log) != 1 || !got.UpdatedAt.Equal(e.at(time.Second)) || got.Version != r.Version {
		t.Fatalf("an append under the fence: %+v %v", got, err)
	}
	ev := got.Log[0]
	if want := e.ev(runs.EventNodeStarted, "a", time.Second); ev.Type != want.Type || ev.NodeID != want.NodeID || !ev.At.Equal(want.At) || string(ev.Payload) != string(want.Payload) {
		t.Fatalf("event read back %+v, wrote %+v", ev, want)
	}
	for name, bad := range map[string]runs.Fence{
		"an earlier length": f,                                  // the log has grown since
		"a later length":    {Epoch: f.Epoch, At: f.At + 2},     // a log the run never had
		"another epoch":     {Epoch: f.Epoch + 1, At: f.At + 1}, // a claim the appender does not hold
	} {
		cur, err := e.st.AppendLog(e.ctx, r.ID, bad, []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 2*time.Second)}, e.at(2*time.Second))
		if !errors.Is(err, runs.ErrStatusConflict) || len(cur.Log) != 1 {
			t.Fatalf("an append under %s: %d events %v, want ErrStatusConflict and nothing appended", name, len(cur.Log), err)
		}
	}
	if got := e.get(t, r.ID); len(got.Log) != 1 || !got.UpdatedAt.Equal(e.at(time.Second)) {
		t.Fatalf("refused appends changed the run: %v", logTypes(got))
	}
	if _, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCancelled, "", e.at(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.AppendLog(e.ctx, r.ID, runs.Fence{Epoch: f.Epoch, At: 1}, []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 4*time.Second)}, e.at(4*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("an append to a cancelled run: %v", err)
	}
	if _, err := e.st.AppendLog(e.ctx, runs.NewRunID("acme"), runs.Fence{}, []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}, e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("an append to no run: %v", err)
	}
}

// appendRace: executions of one run, each having adopted it (its own
// epoch), append at once: only the holder of the latest epoch appends,
// and its events are in the log once.
func appendRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	fences := make([]runs.Fence, e.racers)
	for i := range fences {
		got, err := e.st.Adopt(e.ctx, r.ID, e.now)
		if err != nil {
			t.Fatal(err)
		}
		fences[i] = got.Fence()
	}
	errs := e.race(func(i int) error {
		_, err := e.st.AppendLog(e.ctx, r.ID, fences[i], []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0), e.ev(runs.EventNodeCompleted, "a", 0)}, e.now)
		return err
	})
	for i, err := range errs {
		latest := i == len(errs)-1
		switch {
		case latest && err != nil:
			t.Fatalf("the latest epoch's append: %v", err)
		case !latest && !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("an earlier epoch's append: %v, want ErrStatusConflict", err)
		}
	}
	if got := e.get(t, r.ID); !slices.Equal(logTypes(got), []string{"node.started@a", "node.completed@a"}) {
		t.Fatalf("log %v", logTypes(got))
	}
}

// appendLostAnswer: the append applied and its answer was lost; the retry
// under the same fence is answered as applied and the events are in the
// log once. A later append continues from there.
func appendLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	evs := []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}
	e.lose("UpdateItem")
	if got, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), evs, e.now); err != nil || !slices.Equal(logTypes(got), []string{"node.started@a"}) {
		t.Fatalf("the append whose answer was lost: %v %v, want no error and the event once", logTypes(got), err)
	}
	got, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), evs, e.now)
	if err != nil || !slices.Equal(logTypes(got), []string{"node.started@a"}) {
		t.Fatalf("retry of an applied append: %v %v, want no error and the event once", logTypes(got), err)
	}
	got, err = e.st.AppendLog(e.ctx, r.ID, got.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", 0)}, e.now)
	if err != nil || !slices.Equal(logTypes(got), []string{"node.started@a", "node.completed@a"}) {
		t.Fatalf("the next append: %v %v", logTypes(got), err)
	}
}

// appendOvertaken: an execution whose run the stale-run pass claimed (its
// heartbeat stopped) appends nothing; the claimer appends under its own
// fence.
func appendOvertaken(t *testing.T, e *env) {
	r := e.running(t, 0)
	mine, err := e.st.AppendLog(e.ctx, r.ID, r.Fence(), []runs.LogEvent{e.ev(runs.EventNodeStarted, "a", 0)}, e.now)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := e.st.Claim(e.ctx, r.ID, e.at(0), e.at(window))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.AppendLog(e.ctx, r.ID, mine.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", window)}, e.at(window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the overtaken execution's append: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, mine.Epoch, e.at(window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("the overtaken execution's renewal: %v, want ErrStatusConflict", err)
	}
	got, err := e.st.AppendLog(e.ctx, r.ID, claimed.Fence(), []runs.LogEvent{e.ev(runs.EventNodeCompleted, "a", window)}, e.at(window))
	if err != nil || !slices.Equal(logTypes(got), []string{"node.started@a", "node.completed@a"}) {
		t.Fatalf("the claimer's append: %v %v", logTypes(got), err)
	}
}
