package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestSnapshotCompletedAtIsTheTerminalEvents: a run's snapshot is a
// projection of its event log (events.md), so its completedAt is the time
// of its terminal event, as the stream and the poll serve it: also when
// the clock that stamped the end (the api function's, for a cancel) is
// behind the one that stamped the node event before it (the executor's),
// where the terminal event is served at that node event's time
// (atOrAfter). GET /runs/{runId} and the values stream's state.snapshot
// agree with run.completed, run.failed and run.cancelled.
func TestSnapshotCompletedAtIsTheTerminalEvents(t *testing.T) {
	for _, end := range []runs.Status{runs.StatusCompleted, runs.StatusFailed, runs.StatusCancelled} {
		t.Run(string(end), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			r := f.newRun(t, "acme")
			f.move(t, r.ID, runs.StatusPending, runs.StatusRunning, "", t0.Add(time.Second))
			run, err := f.runs.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The executor's clock is 5 s ahead of the one that ends the run.
			ahead := t0.Add(5 * time.Second)
			if _, err := f.runs.AppendLog(ctx, r.ID, run.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "n1", At: ahead,
				Payload: json.RawMessage(`{"nodeId":"n1"}`)}}, ahead); err != nil {
				t.Fatal(err)
			}
			f.move(t, r.ID, runs.StatusRunning, end, "boom", t0.Add(2*time.Second))

			path := "/runs/" + runs.ProjectID(r.ID)
			resp, snap := f.do(t, ev(http.MethodGet, path, "acme", "", ""))
			if resp.StatusCode != 200 {
				t.Fatalf("GET: %d %s", resp.StatusCode, resp.Body)
			}
			s := f.stream(t, eventsReq(path+"/events", "acme", "", ""))
			term := eventDoc(t, s.Frames[len(s.Frames)-1].Data)
			if term["timestamp"] != snap["completedAt"] {
				t.Errorf("GET completedAt %v, the terminal event %s at %v", snap["completedAt"], term["type"], term["timestamp"])
			}
			if got := f.h.runAction(ev(http.MethodGet, path, "acme", "", ""), mustRun(f.runs.Get(ctx, r.ID)))["completedAt"]; got != term["timestamp"] {
				t.Errorf("a run's action (a commerce replay) completedAt %v, the terminal event at %v", got, term["timestamp"])
			}
			vs := f.stream(t, eventsReq(path+"/events", "acme", "streamMode=values", ""))
			var vsnap map[string]any
			if err := json.Unmarshal([]byte(vs.Frames[0].Data), &vsnap); err != nil {
				t.Fatal(err)
			}
			if vsnap["completedAt"] != term["timestamp"] {
				t.Errorf("state.snapshot completedAt %v, the terminal event at %v", vsnap["completedAt"], term["timestamp"])
			}
		})
	}
}

func mustRun(r runs.Run, err error) runs.Run {
	if err != nil {
		panic(err)
	}
	return r
}
