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
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestForkRetriedAcrossTheRetentionBoundaryKeepsItsFork: a keyed fork
// made just inside the fork retention wrote its run and died before its
// Layer-1 completion (the run is not part of the completion: memory and
// conditional DynamoDB writes). The key's retry, after the lease, comes
// past the retention boundary: it re-executes, and its fork exists, so it
// answers that fork's 201 (then replays it), never a 422
// fork_point_invalid recorded as the key's answer while the fork it
// created runs. A new key past the boundary is still refused. Memory and
// every emulator.
func TestForkRetriedAcrossTheRetentionBoundaryKeepsItsFork(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		var rs runs.RunStore = runs.NewMemRuns()
		var inner idem.Store = idemmem.New()
		if e != nil {
			c := e.Client(dynamotest.FastRetries)
			rs = &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
			st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
			if err != nil {
				t.Fatal(err)
			}
			inner = st
		}
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
		const key = "k-fork-boundary-0000000001"
		body := `{"mode":"replay","fromSeq":1}`
		r, m := f.fork(t, src.ID, key, body)
		fork, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || fork == "" {
			t.Fatalf("the fork inside the retention, whose completion was lost: %d %s", r.StatusCode, r.Body)
		}
		clk.Advance(idem.DefaultLease + time.Second)
		r, m = f.fork(t, src.ID, key, body)
		if r.StatusCode != http.StatusCreated || m["runId"] != fork {
			t.Fatalf("the key's retry past the retention boundary: %d %s, want 201 naming its fork %s", r.StatusCode, r.Body, fork)
		}
		if again, m2 := f.fork(t, src.ID, key, body); again.StatusCode != http.StatusCreated || m2["runId"] != fork {
			t.Fatalf("the key's replay: %d %s", again.StatusCode, again.Body)
		}
		if r, m := f.fork(t, src.ID, "k-fork-boundary-0000000002", body); r.StatusCode != http.StatusUnprocessableEntity || m["error"] != CodeForkPointInvalid {
			t.Fatalf("a new key past the boundary: %d %s, want 422 %s", r.StatusCode, r.Body, CodeForkPointInvalid)
		}
	})
}
