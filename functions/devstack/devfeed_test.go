package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestRunsExecuteOnAnEngineWithoutStreams: on dynalite, which has no
// DynamoDB Streams, the runs the stack creates are still executed (the
// executor is fed from the stack's own writes), whether dev started the
// engine or was given its endpoint (--dynamodb-endpoint, as the
// conformance seams' supervisor gives it): several runs created at once,
// and a same-key retry, all reach completed, each started once; the ready
// lines say what such an engine leaves out.
func TestRunsExecuteOnAnEngineWithoutStreams(t *testing.T) {
	t.Run("started", func(t *testing.T) {
		testRunsExecuteWithoutStreams(t, devstack.Options{Engine: emulator.Dynalite})
	})
	t.Run("endpoint", func(t *testing.T) {
		testRunsExecuteWithoutStreams(t, devstack.Options{Endpoint: dynamotest.Start(t, dynamotest.Dynalite).Endpoint})
	})
}

func testRunsExecuteWithoutStreams(t *testing.T, o devstack.Options) {
	key := "idk_feed_test_0123456789"
	var out testutil.SyncBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	o.Addr, o.APIKeys, o.Stdout, o.TablePrefix = "127.0.0.1:0", []string{key + "=acme"}, &out, fmt.Sprintf("feed%d-", time.Now().UnixNano())
	s, err := devstack.Start(ctx, o)
	if err != nil {
		testutil.Unavailable(t, "dynalite: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	if !strings.Contains(out.String(), "the executor runs what this process writes, and nothing is audited") {
		t.Errorf("the ready lines do not say what an engine without streams leaves out:\n%s", out.String())
	}
	const n = 12
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, m := testutil.DoJSON(t, "POST", s.URL()+"/runs", `{"workflowId":"conformance-noop"}`,
				"Authorization", testutil.Bearer(key), "Idempotency-Key", fmt.Sprintf("feed-test-key-%02d-0123456789", i))
			if resp.StatusCode != 201 {
				t.Errorf("run %d: %d %v", i, resp.StatusCode, m)
			}
			ids[i], _ = m["runId"].(string)
		}()
	}
	wg.Wait()
	// A same-key retry is a replay: it names the same run and writes none.
	if resp, m := testutil.DoJSON(t, "POST", s.URL()+"/runs", `{"workflowId":"conformance-noop"}`,
		"Authorization", testutil.Bearer(key), "Idempotency-Key", "feed-test-key-00-0123456789"); resp.StatusCode != 201 || m["runId"] != ids[0] {
		t.Fatalf("retry: %d %v, want the run %s", resp.StatusCode, m, ids[0])
	}
	for i, id := range ids {
		for {
			resp, m := testutil.DoJSON(t, "GET", s.URL()+"/runs/"+id, "", "Authorization", testutil.Bearer(key))
			if resp.StatusCode == 200 && m["status"] == "completed" {
				break
			}
			if st, _ := m["status"].(string); st == "failed" || st == "cancelled" {
				t.Fatalf("run %d %s: %v", i, id, m)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("run %d %s never completed: last %d %v", i, id, resp.StatusCode, m)
			case <-time.After(50 * time.Millisecond):
			}
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL()+"/runs/"+id+"/events", nil)
		req.Header.Set("Authorization", testutil.Bearer(key))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if started, done := strings.Count(string(body), "event: run.started\n"), strings.Count(string(body), "event: run.completed\n"); resp.StatusCode != 200 || started != 1 || done != 1 {
			t.Fatalf("run %d %s: events %d with %d run.started and %d run.completed:\n%s", i, id, resp.StatusCode, started, done, body)
		}
	}
}

// TestRunsWrittenElsewhereExecuteOnAnEngineWithoutStreams: on dynalite a
// run the stack did not write itself (another process on the same tables,
// or a write whose hand-over a stop interrupted) is not fed to the
// executor, and still completes: the stale-run pass drives it once it has
// had no progress for RUN_STALE_SECONDS.
func TestRunsWrittenElsewhereExecuteOnAnEngineWithoutStreams(t *testing.T) {
	key := "idk_feed_test_0123456789"
	e := dynamotest.Start(t, dynamotest.Dynalite)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s, err := devstack.Start(ctx, devstack.Options{Endpoint: e.Endpoint, Addr: "127.0.0.1:0", APIKeys: []string{key + "=acme"},
		TablePrefix: fmt.Sprintf("feedelse%d-", time.Now().UnixNano()), Settings: map[string]string{"RUN_STALE_SECONDS": "1"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	run := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), time.Now())
	if err := (&runs.DynamoRuns{Client: e.Client(), Table: s.Tables()["RunsTable"]}).Create(ctx, run); err != nil {
		t.Fatal(err)
	}
	for {
		resp, m := testutil.DoJSON(t, "GET", s.URL()+"/runs/"+runs.ProjectID(run.ID), "", "Authorization", testutil.Bearer(key))
		if resp.StatusCode == 200 && m["status"] == "completed" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the run written elsewhere never completed: last %d %v", resp.StatusCode, m)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestResumeExecutesAtOnceOnAnEngineWithoutStreams: on dynalite the
// `:resume` of a paused run hands the run to the executor as the runs
// stream's MODIFY (paused to running) does on the stream engines (RED_TEAM
// 680): with RUN_STALE_SECONDS at a day, so the stale-run pass cannot be
// what drives it, the resumed wait starts again within the guard, and
// once only (one resume, one execution). The run is paused (immediate)
// in a wait of 5 s: its execution learns of the pause when the wait ends
// (its claim's renewals come every third of RUN_STALE_SECONDS), and the
// resume's record, in order behind that execution's for the run as the
// stream's is, is handed over then.
func TestResumeExecutesAtOnceOnAnEngineWithoutStreams(t *testing.T) {
	su := newSurfaceWith(t, dynamotest.Dynalite, map[string]string{"RUN_STALE_SECONDS": "86400"})
	resp, m, body := su.do("POST", "/runs", `{"workflowId":"conformance-replay-ordinal-loop","inputs":{"delayMs":5000}}`)
	if resp.StatusCode != 201 {
		t.Fatalf("createRun: %d %s", resp.StatusCode, body)
	}
	id := m["runId"].(string)
	// The hang guard: far below RUN_STALE_SECONDS, far above a hand-over.
	await := func(what string, cond func(pollAnswer) bool) pollAnswer {
		t.Helper()
		for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			a := su.pollAll(id)
			if cond(a) {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 45 s (RUN_STALE_SECONDS is a day); log %v status %s", what, a.types, a.status)
			}
		}
	}
	await("the wait starts", func(a pollAnswer) bool { return count(a.types, "node.started") == 3 }) // start, effect, wait
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":pause", `{"drainPolicy":"immediate"}`); r.StatusCode != 202 {
		t.Fatalf("pause: %d %s", r.StatusCode, body)
	}
	await("run.paused is recorded", func(a pollAnswer) bool { return count(a.types, "run.paused") == 1 })
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":resume", `{}`); r.StatusCode != 202 {
		t.Fatalf("resume: %d %s", r.StatusCode, body)
	}
	after := func(a pollAnswer) []string {
		for i, typ := range a.types {
			if typ == "run.resumed" {
				return a.types[i+1:]
			}
		}
		return nil
	}
	await("the resumed node starts", func(a pollAnswer) bool { return count(after(a), "node.started") >= 1 })
	time.Sleep(2 * time.Second) // a second hand-over, if any, has had its time
	if a := su.pollAll(id); count(after(a), "node.started") != 1 || a.status != "running" {
		t.Fatalf("after the resume: %v (status %s), want one node.started, running", after(a), a.status)
	}
}
