package apifn

// Parallel duplicates of each lifecycle write (fork, retry, cancel), with
// and without an Idempotency-Key, on the memory stores and on every
// emulator.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestParallelDuplicatesOfEachLifecycleWrite races, on one source, 12
// copies of each lifecycle write. Under one Idempotency-Key a fork or a
// retry makes exactly one run: every answer is its 201, byte for byte, or
// 409 idempotency_in_flight with Retry-After. Keyless retries each make a
// run of their own, each listed on the failed run. Keyed and keyless
// cancels of one running run: exactly one request's cancel moves it (the
// key's copies all answer its 200, or in flight), every other is 409
// run_terminal, and the log holds one terminal event. Every error answer
// is the v2 error envelope.
func TestParallelDuplicatesOfEachLifecycleWrite(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		rs := runs.NewMemRuns()
		parallelDuplicates(t, rs, hostOf(t, rs, idem.Config{}, nil))
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client(dynamotest.FastRetries)
		rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		parallelDuplicates(t, rs, hostOf(t, rs, idem.Config{Store: st}, nil))
	})
	t.Run("transactional", func(t *testing.T) {
		// A fork's and a retry's run commit with the Layer-1 completion
		// (RUNS_TRANSACTIONAL), on the engines with transactions.
		dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
			rs, st := dynamoStores(t, e, e.Client(dynamotest.FastRetries), true)
			parallelDuplicates(t, rs, hostOf(t, rs, idem.Config{Store: st}, nil))
		})
	})
}

func parallelDuplicates(t *testing.T, rs raceStore, f *fixture) {
	const n = 12
	ctx := context.Background()
	envelope, err := wireschema.Load(t).Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	source := func(status runs.Status) runs.Run {
		t.Helper()
		now := time.Now().UTC()
		r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), now)
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		r, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
		if err != nil {
			t.Fatal(err)
		}
		evs := []runs.LogEvent{
			{Type: runs.EventNodeStarted, NodeID: "start", At: now, Payload: json.RawMessage(`{"nodeId":"start","typeId":"x"}`)},
			{Type: runs.EventNodeCompleted, NodeID: "start", At: now, Payload: json.RawMessage(`{"nodeId":"start","outputs":{}}`)},
		}
		if _, err := rs.AppendLog(ctx, r.ID, r.Fence(), evs, now); err != nil {
			t.Fatal(err)
		}
		if status != runs.StatusRunning {
			if r, err = rs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, status, "boom", now.Add(time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		}
		return r
	}
	type answer struct {
		resp events.APIGatewayV2HTTPResponse
		m    map[string]any
	}
	fire := func(mk func(i int) events.APIGatewayV2HTTPRequest) []answer {
		out := make([]answer, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r, err := f.h.Handle(ctx, mk(i))
				if err != nil {
					t.Errorf("Handle: %v", err)
					return
				}
				var m map[string]any
				_ = json.Unmarshal([]byte(r.Body), &m)
				out[i] = answer{r, m}
			})
		}
		wg.Wait()
		for _, a := range out {
			if a.resp.StatusCode >= 400 {
				if err := wireschema.Validate(envelope, []byte(a.resp.Body)); err != nil {
					t.Errorf("%d %s: %v", a.resp.StatusCode, a.resp.Body, err)
				}
			}
		}
		return out
	}
	// oneRun checks the answers of one keyed request sent n times at once.
	oneRun := func(what string, as []answer) string {
		t.Helper()
		body := ""
		for _, a := range as {
			switch {
			case a.resp.StatusCode == 201 && (body == "" || a.resp.Body == body):
				body = a.resp.Body
			case a.resp.StatusCode == 409 && a.m["error"] == "idempotency_in_flight" && a.resp.Headers["Retry-After"] != "":
			default:
				t.Fatalf("%s: %d %v %s (the key's 201: %s)", what, a.resp.StatusCode, a.resp.Headers, a.resp.Body, body)
			}
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(body), &m)
		id, _ := m["runId"].(string)
		if id == "" {
			t.Fatalf("%s: no 201 among the answers", what)
		}
		if _, err := rs.Get(ctx, id); err != nil {
			t.Fatalf("%s: its run %s: %v", what, id, err)
		}
		return id
	}

	failed := source(runs.StatusFailed)
	path := "/runs/" + runs.ProjectID(failed.ID)
	oneRun("forks under one key", fire(func(int) events.APIGatewayV2HTTPRequest {
		return ev("POST", path+":fork", "acme", "k-dup-fork-000000000000000001", `{"mode":"branch","fromSeq":1}`)
	}))
	retried := oneRun("retries under one key", fire(func(int) events.APIGatewayV2HTTPRequest {
		return ev("POST", path+"/retry", "acme", "k-dup-retry-00000000000000001", "")
	}))
	keyless := map[string]bool{retried: true}
	for _, a := range fire(func(int) events.APIGatewayV2HTTPRequest { return ev("POST", path+"/retry", "acme", "", "") }) {
		id, _ := a.m["runId"].(string)
		if a.resp.StatusCode != 201 || keyless[id] {
			t.Fatalf("a keyless retry: %d %s", a.resp.StatusCode, a.resp.Body)
		}
		keyless[id] = true
	}
	got, err := rs.Get(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Retries) != len(keyless) {
		t.Fatalf("the failed run lists %d retries, %d were answered 201", len(got.Retries), len(keyless))
	}
	for _, id := range got.Retries {
		if !keyless[id] {
			t.Fatalf("the failed run lists %s, answered to no retry", id)
		}
	}

	for round := range 3 {
		live := source(runs.StatusRunning)
		key := fmt.Sprintf("k-dup-cancel-%d-0000000000000001", round)
		as := fire(func(i int) events.APIGatewayV2HTTPRequest {
			if i%2 == 0 {
				return ev("POST", "/runs/"+runs.ProjectID(live.ID)+"/cancel", "acme", key, "")
			}
			return ev("POST", "/runs/"+runs.ProjectID(live.ID)+"/cancel", "acme", "", "")
		})
		keyedWon, keylessWon := false, 0
		for i, a := range as {
			switch {
			case a.resp.StatusCode == 200 && i%2 == 0:
				keyedWon = true
			case a.resp.StatusCode == 200:
				keylessWon++
			}
		}
		if keyedWon == (keylessWon == 1) || keylessWon > 1 {
			t.Fatalf("round %d: the key's cancel won %v, %d keyless cancels won", round, keyedWon, keylessWon)
		}
		for i, a := range as {
			keyed := i%2 == 0
			ok := a.resp.StatusCode == 409 && a.m["error"] == "run_terminal" ||
				a.resp.StatusCode == 200 && keyed == keyedWon ||
				keyed && a.resp.StatusCode == 409 && a.m["error"] == "idempotency_in_flight"
			if !ok {
				t.Fatalf("round %d, cancel %d: %d %s", round, i, a.resp.StatusCode, a.resp.Body)
			}
		}
		if r, err := rs.Get(ctx, live.ID); err != nil || r.Status != runs.StatusCancelled {
			t.Fatalf("round %d: the run is %s (%v)", round, r.Status, err)
		}
		terminal := 0
		for _, raw := range rawEvents(t, f, live.ID) {
			var e struct{ Type string }
			_ = json.Unmarshal(raw, &e)
			if e.Type == "run.cancelled" || e.Type == "run.completed" || e.Type == "run.failed" {
				terminal++
			}
		}
		if terminal != 1 {
			t.Fatalf("round %d: %d terminal events", round, terminal)
		}
	}
}
