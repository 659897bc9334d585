package apifn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestEventTimesFollowSequenceUnderClockSkew: the api function and the
// executor stamp a run's times on their own clocks, which may disagree.
// With the executor's clock 5 s ahead of the api's, a cancel landing
// after the executor's node.started (the api stamps the cancel, the
// executor the node event) reads run.cancelled at or after
// node.started, never before it; with the executor's clock 3 s behind,
// its node events read at or after run.started (stamped by the api's
// createRun), and the run's end, at or after them. Each event's time is
// what every read serves (the log read twice is byte for byte the same),
// and durationMs is the time from run.started to the terminal event.
func TestEventTimesFollowSequenceUnderClockSkew(t *testing.T) {
	apiNow := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		skew time.Duration // the executor's clock minus the api's
		end  string
	}{
		{"executor ahead, cancelled", 5 * time.Second, "cancel"},
		{"executor behind, cancelled", -3 * time.Second, "cancel"},
		{"executor behind, completed", -3 * time.Second, "finish"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			now := apiNow
			f := hostOf(t, runs.NewMemRuns(), idem.Config{}, func(_ *fixture, cfg *Config) {
				cfg.Test = TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return now }}}
			})
			_, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
			id, _ := m["runId"].(string)
			if id == "" {
				t.Fatalf("createRun: %v", m)
			}
			// The executor, on its own clock, starts the run and its node.
			exec := func(d time.Duration) time.Time { return apiNow.Add(c.skew + d) }
			r, err := f.runs.Transition(ctx, id, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", exec(100*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			node := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "n1", At: exec(200 * time.Millisecond), Payload: json.RawMessage(`{"nodeId":"n1"}`)}
			if r, err = f.runs.AppendLog(ctx, id, r.Fence(), []runs.LogEvent{node}, node.At); err != nil {
				t.Fatal(err)
			}
			now = apiNow.Add(time.Second) // a second later on the api's clock
			switch c.end {
			case "cancel":
				if resp, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+"/cancel", "acme", "", `{}`)); resp.StatusCode != 200 {
					t.Fatalf("cancel: %d %s", resp.StatusCode, resp.Body)
				}
			case "finish":
				if _, err := f.runs.Finish(ctx, id, r.Epoch, runs.StatusCompleted, "", exec(time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			resp, body := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id)+"/events/poll", "acme", "", ""))
			again, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id)+"/events/poll", "acme", "", ""))
			if resp.StatusCode != 200 || again.Body != resp.Body {
				t.Fatalf("events: %d %s; read again: %s", resp.StatusCode, resp.Body, again.Body)
			}
			evs, _ := body["events"].([]any)
			if len(evs) != 3 {
				t.Fatalf("events: %s, want run.started, node.started and the end", resp.Body)
			}
			var prev, first time.Time
			for i, e := range evs {
				e := e.(map[string]any)
				ts, err := time.Parse(time.RFC3339Nano, e["timestamp"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = ts
				}
				if ts.Before(prev) {
					t.Fatalf("event %v %s at %s, before the event ahead of it at %s: the log's times must follow its sequence whatever the clocks; log %s",
						e["sequence"], e["type"], e["timestamp"], prev.Format(time.RFC3339Nano), resp.Body)
				}
				prev = ts
			}
			end := evs[2].(map[string]any)
			dur, _ := end["payload"].(map[string]any)["durationMs"].(float64)
			if want := prev.Sub(first).Milliseconds(); int64(dur) != want {
				t.Errorf("%s durationMs %v, want %d: the time from run.started to it", end["type"], dur, want)
			}
		})
	}
}
