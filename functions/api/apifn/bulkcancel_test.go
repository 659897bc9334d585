package apifn

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/wireschema"
)

const bulkPath = "/runs:bulk-cancel"

// bulkResult is one entry of a bulk cancel's answer.
type bulkResult struct {
	RunID  string         `json:"runId"`
	OK     bool           `json:"ok"`
	Status string         `json:"status"`
	Error  map[string]any `json:"error"`
}

// bulkRun creates a run of tenant in status (pending, running, or a
// terminal one reached from running).
func bulkRun(t *testing.T, rs runs.RunStore, tenant string, status runs.Status) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun(tenant, "conformance-noop", json.RawMessage(`{}`), time.Now())
	if err := rs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if status == runs.StatusPending {
		return r
	}
	r, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if status == runs.StatusRunning {
		return r
	}
	if r, err = rs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, status, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

// bulkBody is a bulk cancel's body naming ids, with reason when not "".
func bulkBody(reason string, ids ...string) string {
	m := map[string]any{"runIds": ids}
	if reason != "" {
		m["reason"] = reason
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// bulkAnswer checks a bulk cancel's 200 against the OpenWOP document's
// response schema (closed, each error an envelope) and returns its results.
func bulkAnswer(t *testing.T, o *wireschema.Oracle, status int, body string) []bulkResult {
	t.Helper()
	if status != http.StatusOK {
		t.Fatalf("bulk cancel: %d %s, want 200", status, body)
	}
	sch, _, err := o.Response("POST", bulkPath, 200)
	if err != nil {
		t.Fatal(err)
	}
	if err := wireschema.Validate(sch, []byte(body)); err != nil {
		t.Fatalf("the answer is not the operation's 200: %v\n%s", err, body)
	}
	var out struct {
		Results []bulkResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatal(err)
	}
	return out.Results
}

// cancelledEvents counts the run.cancelled events of a run's log as served.
func cancelledEvents(t *testing.T, f *fixture, runID string) int {
	t.Helper()
	n := 0
	for _, raw := range rawEvents(t, f, runID) {
		var e struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Type == EventRunCancelled {
			n++
		}
	}
	return n
}

// TestBulkCancelRuns: POST /runs:bulk-cancel (bulkCancelRuns) answers 200
// with one entry per id, in request order (runs.md §Bulk cancel): the
// caller's pending and running runs are cancelled (ok, cancelled, the
// reason kept, one run.cancelled each), an ended run is run_terminal,
// another tenant's id is id_tenant_mismatch (that run untouched, never a
// top-level 403), an unknown id not_found. The answer is the OpenWOP
// document's 200; its key replays it byte for byte, and the key with
// another body is 409 idempotency_key_mismatch. In memory and on every
// emulator.
func TestBulkCancelRuns(t *testing.T) {
	o := wireschema.Load(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		pending := bulkRun(t, rs, "acme", runs.StatusPending)
		running := bulkRun(t, rs, "acme", runs.StatusRunning)
		done := bulkRun(t, rs, "acme", runs.StatusCompleted)
		other := bulkRun(t, rs, "globex", runs.StatusRunning)
		unknown := runs.NewRunID("acme")
		ids := []string{pending.ID, done.ID, other.ID, unknown, running.ID}
		const key = "k-bulk-cancel-0123456789abcdef"
		body := bulkBody("cleanup", ids...)
		resp, _ := f.do(t, ev("POST", bulkPath, "acme", key, body))
		got := bulkAnswer(t, o, resp.StatusCode, resp.Body)
		if len(got) != len(ids) {
			t.Fatalf("%d results for %d ids: %s", len(got), len(ids), resp.Body)
		}
		for i, id := range ids {
			if got[i].RunID != id {
				t.Fatalf("result %d names %q, want %q (request order): %s", i, got[i].RunID, id, resp.Body)
			}
		}
		wantCode := []string{"", "run_terminal", "id_tenant_mismatch", "not_found", ""}
		for i, r := range got {
			switch {
			case wantCode[i] == "" && (!r.OK || r.Status != "cancelled" || r.Error != nil):
				t.Errorf("result %d: %+v, want ok cancelled", i, r)
			case wantCode[i] != "" && (r.OK || r.Status != "" || r.Error["error"] != wantCode[i]):
				t.Errorf("result %d: %+v, want ok false with %s", i, r, wantCode[i])
			}
		}
		ctx := context.Background()
		for _, id := range []string{pending.ID, running.ID} {
			r, err := rs.Get(ctx, id)
			if err != nil || r.Status != runs.StatusCancelled || r.CancelReason != "cleanup" {
				t.Errorf("run %s: %+v %v, want cancelled with the reason", id, r, err)
			}
			if n := cancelledEvents(t, f, id); n != 1 {
				t.Errorf("run %s has %d run.cancelled events, want 1", id, n)
			}
		}
		if r, err := rs.Get(ctx, other.ID); err != nil || r.Status != runs.StatusRunning {
			t.Errorf("the other tenant's run: %+v %v, want it running", r, err)
		}
		if r, err := rs.Get(ctx, done.ID); err != nil || r.Status != runs.StatusCompleted {
			t.Errorf("the ended run: %+v %v, want it completed", r, err)
		}
		again, _ := f.do(t, ev("POST", bulkPath, "acme", key, body))
		if again.StatusCode != resp.StatusCode || again.Body != resp.Body || header.First(again.Headers, "OpenWOP-Idempotent-Replay") != "true" {
			t.Fatalf("the key's replay: %d %s (replay %q), want %d %s", again.StatusCode, again.Body,
				header.First(again.Headers, "OpenWOP-Idempotent-Replay"), resp.StatusCode, resp.Body)
		}
		if r, m := f.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", pending.ID))); r.StatusCode != 409 || m["error"] != "idempotency_key_mismatch" {
			t.Fatalf("the key with another body: %d %s, want 409 idempotency_key_mismatch", r.StatusCode, r.Body)
		}
		// A later bulk cancel under another key, and without one: the runs
		// ended, each entry is run_terminal.
		for _, k := range []string{"k-bulk-cancel-later-0123456789", ""} {
			r, _ := f.do(t, ev("POST", bulkPath, "acme", k, bulkBody("", pending.ID, running.ID)))
			for i, res := range bulkAnswer(t, o, r.StatusCode, r.Body) {
				if res.OK || res.Error["error"] != "run_terminal" {
					t.Errorf("key %q, result %d: %+v, want run_terminal", k, i, res)
				}
			}
		}
	})
}

// TestBulkCancelWithoutAKey: with no Idempotency-Key (the default policy
// does not require one) a bulk cancel runs once, as a single cancel does.
func TestBulkCancelWithoutAKey(t *testing.T) {
	o := wireschema.Load(t)
	f := newFixture(t)
	a := bulkRun(t, f.runs, "acme", runs.StatusPending)
	r, _ := f.do(t, ev("POST", bulkPath, "acme", "", bulkBody("", a.ID)))
	if got := bulkAnswer(t, o, r.StatusCode, r.Body); len(got) != 1 || !got[0].OK || got[0].Status != "cancelled" {
		t.Fatalf("%s", r.Body)
	}
}

// TestBulkCancelRefusals: a body outside the operation's schema is refused
// 400 validation_error before Layer 1 reads it (so a corrected request under
// the same key runs): over 100 ids (details.maxRunIds), none, runIds
// missing or not an array of strings, an id outside the runId grammar
// (details.field naming its index), a member the closed body does not
// have, a reason that is not a string or is over 512 characters, no body
// or not JSON; a body of another media type is 415, one over MaxBodyBytes
// 413. Each refusal is the
// OpenWOP document's error envelope.
func TestBulkCancelRefusals(t *testing.T) {
	o := wireschema.Load(t)
	f := newFixture(t)
	a := bulkRun(t, f.runs, "acme", runs.StatusPending)
	many := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = runs.NewRunID("acme")
		}
		return out
	}
	cases := []struct {
		name, body, ct string
		status         int
		field          string
		detail         string
	}{
		{name: "over the cap", body: bulkBody("", many(101)...), status: 400, detail: "maxRunIds"},
		{name: "empty list", body: `{"runIds":[]}`, status: 400, field: "runIds"},
		{name: "no runIds", body: `{"reason":"x"}`, status: 400, field: "runIds"},
		{name: "runIds null", body: `{"runIds":null}`, status: 400, field: "runIds"},
		{name: "runIds a string", body: `{"runIds":"` + a.ID + `"}`, status: 400, field: "runIds"},
		{name: "an id not a string", body: `{"runIds":["` + a.ID + `",7]}`, status: 400, field: "runIds[1]"},
		{name: "a malformed id", body: `{"runIds":["` + a.ID + `","` + a.ID + `","acme~2Fabcdefghijklmnopqr"]}`, status: 400, field: "runIds[2]"},
		{name: "an id without a tenant", body: `{"runIds":["abcdefghijklmnopqrstuv"]}`, status: 400, field: "runIds[0]"},
		{name: "unknown member", body: `{"runIds":["` + a.ID + `"],"force":true}`, status: 400, field: "force"},
		{name: "reason not a string", body: `{"runIds":["` + a.ID + `"],"reason":1}`, status: 400, field: "reason"},
		{name: "reason too long", body: bulkBody(strings.Repeat("é", 513), a.ID), status: 400, field: "reason"},
		{name: "no body", body: "", status: 400},
		{name: "an array", body: `["` + a.ID + `"]`, status: 400},
		{name: "not JSON", body: `{"runIds":`, status: 400},
		{name: "a member twice", body: `{"runIds":["` + a.ID + `"],"runIds":["` + a.ID + `"]}`, status: 400},
		{name: "another media type", body: bulkBody("", a.ID), ct: "text/plain", status: 415},
		{name: "over MaxBodyBytes", body: bulkBody(strings.Repeat("a", MaxBodyBytes), a.ID), status: 413},
	}
	const key = "k-bulk-refused-0123456789abcdef"
	for _, c := range cases {
		e := ev("POST", bulkPath, "acme", key, c.body)
		if c.ct != "" {
			e.Headers["content-type"] = c.ct
		}
		r, m := f.do(t, e)
		if r.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.StatusCode, r.Body, c.status)
			continue
		}
		sch, _, err := o.Response("POST", bulkPath, r.StatusCode)
		if err != nil {
			t.Fatal(err)
		}
		if err := wireschema.Validate(sch, []byte(r.Body)); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, r.Body)
		}
		d, _ := m["details"].(map[string]any)
		if c.field != "" && d["field"] != c.field {
			t.Errorf("%s: %s, want details.field %q", c.name, r.Body, c.field)
		}
		if c.detail == "maxRunIds" && (m["error"] != "validation_error" || d["maxRunIds"] != float64(100)) {
			t.Errorf("%s: %s, want validation_error with details.maxRunIds 100", c.name, r.Body)
		}
	}
	// Nothing was recorded under the key: the request as it should be runs.
	r, _ := f.do(t, ev("POST", bulkPath, "acme", key, bulkBody("", a.ID)))
	if got := bulkAnswer(t, o, r.StatusCode, r.Body); len(got) != 1 || !got[0].OK {
		t.Fatalf("the corrected request: %s", r.Body)
	}
	// 100 ids is within the cap.
	r, _ = f.do(t, ev("POST", bulkPath, "acme", "", bulkBody("", many(100)...)))
	if got := bulkAnswer(t, o, r.StatusCode, r.Body); len(got) != 100 || got[99].Error["error"] != "not_found" {
		t.Fatalf("100 ids: %d %.300s", r.StatusCode, r.Body)
	}
	// Without a credential: 401, as on every route but the public ones.
	if r, _ := f.do(t, ev("POST", bulkPath, "", "", bulkBody("", a.ID))); r.StatusCode != 401 {
		t.Fatalf("no credential: %d %s", r.StatusCode, r.Body)
	}
	// Another method on the path is 405.
	if r, _ := f.do(t, ev("GET", bulkPath, "acme", "", "")); r.StatusCode != 405 || header.First(r.Headers, "Allow") != "POST" {
		t.Fatalf("GET: %d %s %v", r.StatusCode, r.Body, r.Headers)
	}
}

// TestBulkCancelRepeatedID: an id sent twice is cancelled once, and each
// position carrying it gets that id's one answer.
func TestBulkCancelRepeatedID(t *testing.T) {
	o := wireschema.Load(t)
	f := newFixture(t)
	a := bulkRun(t, f.runs, "acme", runs.StatusRunning)
	b := bulkRun(t, f.runs, "acme", runs.StatusCompleted)
	r, _ := f.do(t, ev("POST", bulkPath, "acme", "k-bulk-repeat-0123456789abcdef", bulkBody("", a.ID, b.ID, a.ID, b.ID)))
	got := bulkAnswer(t, o, r.StatusCode, r.Body)
	if len(got) != 4 || !got[0].OK || got[0].Status != "cancelled" || !got[2].OK || got[2].Status != "cancelled" ||
		got[1].Error["error"] != "run_terminal" || got[3].Error["error"] != "run_terminal" {
		t.Fatalf("%s", r.Body)
	}
	if n := cancelledEvents(t, f, a.ID); n != 1 {
		t.Fatalf("%d run.cancelled events, want 1", n)
	}
}

// TestBulkCancelsRacing: two bulk cancels of the same runs sent at once
// under two keys (released together by a barrier): each run is cancelled
// once, its entry ok in exactly one of the answers and run_terminal in the
// other, and its log has one run.cancelled. In memory and on every
// emulator.
func TestBulkCancelsRacing(t *testing.T) {
	o := wireschema.Load(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		var ids []string
		for i := 0; i < 6; i++ {
			s := runs.StatusPending
			if i%2 == 1 {
				s = runs.StatusRunning
			}
			ids = append(ids, bulkRun(t, rs, "acme", s).ID)
		}
		body := bulkBody("", ids...)
		start := make(chan struct{})
		var wg sync.WaitGroup
		answers := make([][]bulkResult, 2)
		status := make([]int, 2)
		bodies := make([]string, 2)
		for i := range answers {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				resp, err := f.h.Handle(context.Background(), ev("POST", bulkPath, "acme", fmt.Sprintf("k-bulk-race-%d-0123456789abcdef", i), body))
				if err != nil {
					t.Errorf("bulk cancel %d: %v", i, err)
					return
				}
				status[i], bodies[i] = resp.StatusCode, resp.Body
			}(i)
		}
		close(start)
		wg.Wait()
		for i := range answers {
			answers[i] = bulkAnswer(t, o, status[i], bodies[i])
		}
		for j, id := range ids {
			won := 0
			for i := range answers {
				switch r := answers[i][j]; {
				case r.OK && r.Status == "cancelled":
					won++
				case !r.OK && r.Error["error"] == "run_terminal":
				default:
					t.Errorf("answer %d, run %d: %+v", i, j, r)
				}
			}
			if won != 1 {
				t.Errorf("run %d: ok in %d answers, want 1: %s | %s", j, won, bodies[0], bodies[1])
			}
			if n := cancelledEvents(t, f, id); n != 1 {
				t.Errorf("run %d: %d run.cancelled events, want 1", j, n)
			}
		}
	})
}

// failUpdateOf is a client option that fails every UpdateItem of the run
// item id, before it is sent, with a throttle (the store out of reach):
// a DynamoDB fault on one id of a bulk cancel.
func failUpdateOf(id string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("bulkcancel.fault",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok {
						if pk, ok := u.Key["pk"].(*types.AttributeValueMemberS); ok && pk.Value == id {
							return middleware.InitializeOutput{}, middleware.Metadata{}, dynamotest.Throttle()
						}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	}
}

// faultyRuns fails the cancel of one run with the store out of reach (the
// memory backend's stand-in for failUpdateOf).
type faultyRuns struct {
	runs.RunStore
	fail string
}

func (f faultyRuns) Cancel(ctx context.Context, id string, from []runs.Status, by, reason string, now time.Time) (runs.Run, error) {
	if id == f.fail {
		return runs.Run{}, fmt.Errorf("injected: %w", idem.ErrStoreUnavailable)
	}
	return f.RunStore.Cancel(ctx, id, from, by, reason, now)
}

// TestBulkCancelStoreFaultOnOneID: the runs table out of reach for one id
// of a bulk cancel sent without a key (its write refused, throttled)
// answers that entry with the envelope of a single cancel's 503,
// idemkit.store_unavailable, while the others are cancelled; the request
// is 200, never a top-level 500 or 503, and the faulted run is left as it
// was. On every emulator, and in memory with the store's own error. (A
// keyed one: TestBulkCancelStoreFaultIsNeverTheKeysAnswer.)
func TestBulkCancelStoreFaultOnOneID(t *testing.T) {
	o := wireschema.Load(t)
	check := func(t *testing.T, f *fixture, rs runs.RunStore, ids []string, faulted int) {
		r, _ := f.do(t, ev("POST", bulkPath, "acme", "", bulkBody("", ids...)))
		got := bulkAnswer(t, o, r.StatusCode, r.Body)
		for i, res := range got {
			switch {
			case i == faulted && (res.OK || res.Error["error"] != idem.CodeStoreUnavailable):
				t.Errorf("the faulted entry: %+v, want %s", res, idem.CodeStoreUnavailable)
			case i != faulted && (!res.OK || res.Status != "cancelled"):
				t.Errorf("entry %d: %+v, want ok cancelled", i, res)
			}
		}
		if run, err := rs.Get(context.Background(), ids[faulted]); err != nil || run.Status != runs.StatusRunning {
			t.Errorf("the faulted run: %+v %v, want it running", run, err)
		}
	}
	t.Run("memory", func(t *testing.T) {
		mem := runs.NewMemRuns()
		ids := []string{bulkRun(t, mem, "acme", runs.StatusRunning).ID, bulkRun(t, mem, "acme", runs.StatusRunning).ID, bulkRun(t, mem, "acme", runs.StatusPending).ID}
		f := hostOf(t, faultyRuns{RunStore: mem, fail: ids[1]}, idem.Config{}, nil)
		check(t, f, mem, ids, 1)
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		plain := e.Client(dynamotest.FastRetries)
		table := e.CreateTable(t, "RunsTable")
		setup := &runs.DynamoRuns{Client: plain, Table: table}
		ids := []string{bulkRun(t, setup, "acme", runs.StatusRunning).ID, bulkRun(t, setup, "acme", runs.StatusRunning).ID, bulkRun(t, setup, "acme", runs.StatusPending).ID}
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, failUpdateOf(ids[1])), Table: table}
		st, err := idemdynamo.New(idemdynamo.Config{Client: plain, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		check(t, f, setup, ids, 1)
	})
}

// TestBulkCancelRoundTrips: on every emulator, a bulk cancel costs the
// runs table what single cancels of its ids cost, id by id: one UpdateItem
// for each of the caller's live runs, nothing for another tenant's id
// (refused before any read), and a single cancel of one live run is that
// one UpdateItem too. Layer 1's own round trips are on another client.
func TestBulkCancelRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, rs, idem.Config{Store: idemmem.New()}, nil)
		var ids []string
		for i := 0; i < 4; i++ {
			ids = append(ids, bulkRun(t, rs, "acme", runs.StatusRunning).ID)
		}
		other := bulkRun(t, rs, "globex", runs.StatusRunning)
		cnt.Reset()
		single, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(ids[0])+"/cancel", "acme", "k-bulk-trips-single-0123456789", ""))
		if single.StatusCode != 200 {
			t.Fatalf("single cancel: %d %s", single.StatusCode, single.Body)
		}
		perID := cnt.Total()
		if perID != 1 {
			t.Fatalf("a single cancel took %d round trips %v, want 1", perID, cnt.Ops())
		}
		cnt.Reset()
		r, _ := f.do(t, ev("POST", bulkPath, "acme", "k-bulk-trips-0123456789abcdef", bulkBody("", ids[1], other.ID, ids[2], ids[3])))
		if r.StatusCode != 200 {
			t.Fatalf("%d %s", r.StatusCode, r.Body)
		}
		if n, ops := cnt.Total(), cnt.Ops(); n != 3*perID || ops["UpdateItem"] != 3 {
			t.Fatalf("a bulk cancel of 3 live runs and another tenant's took %d round trips %v, want %d (one UpdateItem each)", n, ops, 3*perID)
		}
	})
}

// TestBulkCancelRetriedAfterCrashKeepsItsOKs: a keyed bulk cancel that
// cancelled its runs and died before its Layer-1 record was completed is
// retried, after the lease, under the same key: each run its first attempt
// cancelled is ok cancelled again (the single cancel's keyed semantics:
// the run records the key's record as its canceller), an ended run is
// still run_terminal, and the answer is then replayed. A bulk cancel under
// another key finds every run ended. In memory and on every emulator.
func TestBulkCancelRetriedAfterCrashKeepsItsOKs(t *testing.T) {
	o := wireschema.Load(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now())
		st := &lostCompletion{Store: inner}
		f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, nil)
		a, b := bulkRun(t, rs, "acme", runs.StatusPending), bulkRun(t, rs, "acme", runs.StatusRunning)
		done := bulkRun(t, rs, "acme", runs.StatusFailed)
		body := bulkBody("", a.ID, done.ID, b.ID)
		const key = "k-bulk-crash-0123456789abcdef"
		first, _ := f.do(t, ev("POST", bulkPath, "acme", key, body))
		want := bulkAnswer(t, o, first.StatusCode, first.Body)
		clk.Advance(idem.DefaultLease + time.Second)
		retry, _ := f.do(t, ev("POST", bulkPath, "acme", key, body))
		got := bulkAnswer(t, o, retry.StatusCode, retry.Body)
		for i := range want {
			if got[i].OK != want[i].OK || got[i].Status != want[i].Status || got[i].Error["error"] != want[i].Error["error"] {
				t.Errorf("entry %d: the retry answered %+v, the first attempt %+v", i, got[i], want[i])
			}
		}
		if !got[0].OK || !got[2].OK || got[1].Error["error"] != "run_terminal" {
			t.Fatalf("the retry: %s", retry.Body)
		}
		again, _ := f.do(t, ev("POST", bulkPath, "acme", key, body))
		if again.Body != retry.Body || header.First(again.Headers, "OpenWOP-Idempotent-Replay") != "true" {
			t.Fatalf("the key's replay: %s %v", again.Body, again.Headers)
		}
		other, _ := f.do(t, ev("POST", bulkPath, "acme", "k-bulk-crash-other-0123456789", body))
		for i, r := range bulkAnswer(t, o, other.StatusCode, other.Body) {
			if r.OK || r.Error["error"] != "run_terminal" {
				t.Errorf("another key, entry %d: %+v, want run_terminal", i, r)
			}
		}
	})
}
