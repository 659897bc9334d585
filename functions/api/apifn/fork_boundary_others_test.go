package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestForkPastTheBoundaryOnlyForItsOwnKey: a key whose fork was written
// inside the fork retention (its completion lost) is answered that fork
// past the boundary; nobody else reaches the source's history through
// it. Past the boundary, with that fork written and the key's record
// still open: a fork without a key, under another key, under the same key
// with another body, and under the same key from another tenant (its
// credential names the tenant) are each refused as before (422
// fork_point_invalid, 409 idempotency_key_mismatch, 403 id_tenant_mismatch) and none names
// the key's fork; the key's own retry then still answers its fork. Memory
// and every emulator.
func TestForkPastTheBoundaryOnlyForItsOwnKey(t *testing.T) {
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
		const key = "k-fork-boundary-others-001"
		body := `{"mode":"replay","fromSeq":1}`
		r, m := f.fork(t, src.ID, key, body)
		fork, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || fork == "" {
			t.Fatalf("the fork inside the retention, whose completion was lost: %d %s", r.StatusCode, r.Body)
		}
		clk.Advance(idem.DefaultLease + time.Second)

		notTheFork := func(what string, r events.APIGatewayV2HTTPResponse, wantStatus int, wantCode string) {
			t.Helper()
			var m map[string]any
			_ = json.Unmarshal([]byte(r.Body), &m)
			if r.StatusCode != wantStatus || (wantCode != "" && m["error"] != wantCode) || m["runId"] == fork {
				t.Fatalf("%s past the boundary: %d %s, want %d %s (never the key's fork %s)", what, r.StatusCode, r.Body, wantStatus, wantCode, fork)
			}
		}
		r, _ = f.fork(t, src.ID, "", body)
		notTheFork("a fork without a key", r, http.StatusUnprocessableEntity, CodeForkPointInvalid)
		r, _ = f.fork(t, src.ID, "k-fork-boundary-others-002", body)
		notTheFork("a fork under another key", r, http.StatusUnprocessableEntity, CodeForkPointInvalid)
		r, _ = f.fork(t, src.ID, key, `{"mode":"replay","fromSeq":0}`)
		notTheFork("the key with another body", r, http.StatusConflict, "idempotency_key_mismatch")
		r, _ = f.do(t, ev("POST", forkPath(src.ID), "other", key, body))
		notTheFork("the key from another tenant", r, http.StatusForbidden, "id_tenant_mismatch")

		r, m = f.fork(t, src.ID, key, body)
		if r.StatusCode != http.StatusCreated || m["runId"] != fork {
			t.Fatalf("the key's retry past the boundary: %d %s, want 201 naming its fork %s", r.StatusCode, r.Body, fork)
		}
	})
}
