package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// forkReplayBody is the fork the retention boundary tests send: a replay
// from seq 1.
const forkReplayBody = `{"mode":"replay","fromSeq":1}`

// forkLostInsideRetention is the fork retention boundary on onEveryBackend's
// backend e: a completed source run of acme's (one node started), a host
// under a manual clock whose first Layer-1 completion is lost
// (lostCompletion), and a fork of the source under key (forkReplayBody)
// made a minute inside the fork retention, whose completion was lost. The
// clock is then past the key's lease, so past the boundary. It returns the
// host, the source run and the fork's run id.
func forkLostInsideRetention(t *testing.T, e *dynamotest.Emulator, key string) (*fixture, runs.Run, string) {
	t.Helper()
	ctx := context.Background()
	rs, inner := backendStores(t, e)
	start := time.Now().UTC().Truncate(time.Millisecond)
	clk := clock.NewManual(start)
	f := hostOf(t, rs, idem.Config{Store: &lostCompletion{Store: inner}, Test: idem.TestConfig{Clock: clk}}, func(_ *fixture, c *Config) { c.Test.Clock = clk })

	src := runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":1}`), start)
	if err := rs.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	running, err := rs.Transition(ctx, src.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", start)
	if err != nil {
		t.Fatal(err)
	}
	node := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "start", At: start, Payload: json.RawMessage(`{"nodeId":"start","typeId":"x"}`)}
	if _, err := rs.(runs.LogStore).AppendLog(ctx, src.ID, running.Fence(), []runs.LogEvent{node}, start); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Transition(ctx, src.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", start); err != nil {
		t.Fatal(err)
	}

	clk.Advance(DefaultForkRetention - time.Minute)
	r, m := f.fork(t, src.ID, key, forkReplayBody)
	fork, _ := m["runId"].(string)
	if r.StatusCode != http.StatusCreated || fork == "" {
		t.Fatalf("the fork inside the retention, whose completion was lost: %d %s", r.StatusCode, r.Body)
	}
	clk.Advance(idem.DefaultLease + time.Second)
	return f, src, fork
}
