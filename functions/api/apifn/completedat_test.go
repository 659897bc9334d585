package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestSnapshotCompletedAtIsTheTerminalEvents: a run's snapshot is a
// projection of its event log (events.md), so its completedAt is the time
// of its terminal event, as the stream and the poll serve it: also when
// the clock that stamped the end (the api function's, for a cancel) is
// behind the one that stamped the node event before it (the executor's),
// where the terminal event is served at that node event's time
// (atOrAfter). GET /runs/{runId}, the values stream's state.snapshot and a
// run's action answer (a commerce replay renders it) agree with
// run.completed, run.failed and run.cancelled, in memory and on RunsTable
// (every emulator).
func TestSnapshotCompletedAtIsTheTerminalEvents(t *testing.T) {
	t.Run("mem", func(t *testing.T) { completedAtIsTheTerminalEvents(t, runs.NewMemRuns()) })
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		completedAtIsTheTerminalEvents(t, &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")})
	})
}

func completedAtIsTheTerminalEvents(t *testing.T, rs interface {
	runs.RunStore
	runs.LogStore
}) {
	ctx := context.Background()
	f := hostOf(t, rs, idem.Config{}, nil)
	for _, end := range []runs.Status{runs.StatusCompleted, runs.StatusFailed, runs.StatusCancelled} {
		r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), t0)
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		run, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", t0.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		// The executor's clock is 5 s ahead of the one that ends the run.
		ahead := t0.Add(5 * time.Second)
		if _, err := rs.AppendLog(ctx, r.ID, run.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "n1", At: ahead,
			Payload: json.RawMessage(`{"nodeId":"n1"}`)}}, ahead); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, end, "boom", t0.Add(2*time.Second)); err != nil {
			t.Fatal(err)
		}

		path := "/runs/" + runs.ProjectID(r.ID)
		resp, snap := f.do(t, ev(http.MethodGet, path, "acme", "", ""))
		if resp.StatusCode != 200 {
			t.Fatalf("%s: GET: %d %s", end, resp.StatusCode, resp.Body)
		}
		s := f.stream(t, eventsReq(path+"/events", "acme", "", ""))
		term := eventDoc(t, s.Frames[len(s.Frames)-1].Data)
		if term["timestamp"] != snap["completedAt"] {
			t.Errorf("%s: GET completedAt %v, the terminal event %s at %v", end, snap["completedAt"], term["type"], term["timestamp"])
		}
		got, err := rs.Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if at := f.h.runAction(ev(http.MethodGet, path, "acme", "", ""), got)["completedAt"]; at != term["timestamp"] {
			t.Errorf("%s: a run's action answer completedAt %v, the terminal event at %v", end, at, term["timestamp"])
		}
		vs := f.stream(t, eventsReq(path+"/events", "acme", "streamMode=values", ""))
		var vsnap map[string]any
		if err := json.Unmarshal([]byte(vs.Frames[0].Data), &vsnap); err != nil {
			t.Fatal(err)
		}
		if vsnap["completedAt"] != term["timestamp"] {
			t.Errorf("%s: state.snapshot completedAt %v, the terminal event at %v", end, vsnap["completedAt"], term["timestamp"])
		}
	}
}
