package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/wireschema"
)

func pausePath(id string) string  { return "/runs/" + runs.ProjectID(id) + ":pause" }
func resumePath(id string) string { return "/runs/" + runs.ProjectID(id) + ":resume" }

// pauseOracle holds the schemas a pause's and a resume's answers and the
// run's reads are checked against: the OpenWOP document's 202s, its error
// envelope, getRun's 200 and the run event.
type pauseOracle struct {
	pause, resume, envelope, snapshot, event *jsonschema.Schema
}

func loadPauseOracle(t *testing.T) pauseOracle {
	t.Helper()
	o := wireschema.Load(t)
	var p pauseOracle
	var err error
	if p.pause, _, err = o.Response("POST", "/runs/{runId}:pause", 202); err != nil {
		t.Fatal(err)
	}
	if p.resume, _, err = o.Response("POST", "/runs/{runId}:resume", 202); err != nil {
		t.Fatal(err)
	}
	if p.envelope, err = o.Schema("error-envelope.schema.json"); err != nil {
		t.Fatal(err)
	}
	if p.snapshot, _, err = o.Response("GET", "/runs/{runId}", 200); err != nil {
		t.Fatal(err)
	}
	if p.event, err = o.Schema("run-event.schema.json"); err != nil {
		t.Fatal(err)
	}
	return p
}

// accepted checks a 202 against sch and its status.
func accepted(t *testing.T, sch *jsonschema.Schema, r events202, status string) {
	t.Helper()
	if r.code != http.StatusAccepted {
		t.Fatalf("%d %s, want 202", r.code, r.body)
	}
	if err := wireschema.Validate(sch, []byte(r.body)); err != nil {
		t.Fatalf("the 202 is not the operation's: %v\n%s", err, r.body)
	}
	if !strings.Contains(r.body, `"status":"`+status+`"`) {
		t.Fatalf("202 %s, want status %s", r.body, status)
	}
}

type events202 struct {
	code int
	body string
}

// refused checks an error answer: its status, code, and the envelope.
func (p pauseOracle) refused(t *testing.T, code int, body string, wantCode int, want string) map[string]any {
	t.Helper()
	var m map[string]any
	_ = json.Unmarshal([]byte(body), &m)
	if code != wantCode || m["error"] != want {
		t.Fatalf("%d %s, want %d %s", code, body, wantCode, want)
	}
	if err := wireschema.Validate(p.envelope, []byte(body)); err != nil {
		t.Fatalf("not an error envelope: %v\n%s", err, body)
	}
	return m
}

// runReadsValid checks the run's snapshot and events as served against
// the closed schemas and returns its status and event types.
func (p pauseOracle) runReadsValid(t *testing.T, f *fixture, id string) (string, []string) {
	t.Helper()
	r, m := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", ""))
	if r.StatusCode != 200 {
		t.Fatalf("get: %d %s", r.StatusCode, r.Body)
	}
	if err := wireschema.Validate(p.snapshot, []byte(r.Body)); err != nil {
		t.Fatalf("snapshot: %v\n%s", err, r.Body)
	}
	var types []string
	for _, raw := range rawEvents(t, f, id) {
		if err := wireschema.Validate(p.event, raw); err != nil {
			t.Fatalf("event: %v\n%s", err, raw)
		}
		var e struct{ Type string }
		_ = json.Unmarshal(raw, &e)
		types = append(types, e.Type)
	}
	return m["status"].(string), types
}

// eventPayload is the payload of run id's last event of type typ.
func eventPayload(t *testing.T, f *fixture, id, typ string) map[string]any {
	t.Helper()
	var out map[string]any
	for _, raw := range rawEvents(t, f, id) {
		var e struct {
			Type    string
			Payload map[string]any
		}
		_ = json.Unmarshal(raw, &e)
		if e.Type == typ {
			out = e.Payload
		}
	}
	if out == nil {
		t.Fatalf("run %s has no %s event", id, typ)
	}
	return out
}

func (f *fixture) post(t *testing.T, path, key, body string) events202 {
	t.Helper()
	r, _ := f.do(t, ev("POST", path, "acme", key, body))
	return events202{r.StatusCode, r.Body}
}

// TestPauseAndResumeRun: POST /runs/{runId}:pause and :resume (runs.md
// §Pause and resume) on every backend: a running run pauses (202, the
// OpenWOP document's answer; the snapshot reads paused; run.paused echoes
// the drain policy and reason, valid against the closed payload schema),
// a second pause is 409 run_state_conflict naming paused, the key replays
// its 202 and with another body is 409 idempotency_key_mismatch; the
// resume answers 202 running and records run.resumed, a second resume is
// 409 run_state_conflict naming running; a paused run is cancelled as
// any other, and then both are 409 run_terminal.
func TestPauseAndResumeRun(t *testing.T) {
	p := loadPauseOracle(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		run := bulkRun(t, rs, "acme", runs.StatusRunning)
		const key = "k-pause-0123456789abcdef"
		body := `{"reason":"maintenance","drainPolicy":"drain-current-node"}`
		first := f.post(t, pausePath(run.ID), key, body)
		accepted(t, p.pause, first, "paused")
		status, types := p.runReadsValid(t, f, run.ID)
		if status != "paused" || types[len(types)-1] != runs.EventRunPaused {
			t.Fatalf("after the pause: %s %v, want paused ending with run.paused", status, types)
		}
		if pl := eventPayload(t, f, run.ID, runs.EventRunPaused); pl["drainPolicy"] != "drain-current-node" || pl["reason"] != "maintenance" {
			t.Fatalf("run.paused payload %v", pl)
		}
		r, _ := f.do(t, ev("POST", pausePath(run.ID), "acme", key, body))
		if r.StatusCode != first.code || r.Body != first.body || header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "true" {
			t.Fatalf("the key's replay: %d %s, want %d %s replayed", r.StatusCode, r.Body, first.code, first.body)
		}
		mm := f.post(t, pausePath(run.ID), key, `{"drainPolicy":"immediate"}`)
		p.refused(t, mm.code, mm.body, 409, "idempotency_key_mismatch")
		for _, k := range []string{"k-pause-again-0123456789", ""} {
			again := f.post(t, pausePath(run.ID), k, "")
			m := p.refused(t, again.code, again.body, 409, "run_state_conflict")
			if d, _ := m["details"].(map[string]any); d["runStatus"] != "paused" {
				t.Fatalf("a second pause: %s, want details.runStatus paused", again.body)
			}
		}
		res := f.post(t, resumePath(run.ID), "k-resume-0123456789abcdef", `{"reason":"go"}`)
		accepted(t, p.resume, res, "running")
		status, types = p.runReadsValid(t, f, run.ID)
		if status != "running" || types[len(types)-1] != runs.EventRunResumed {
			t.Fatalf("after the resume: %s %v", status, types)
		}
		again := f.post(t, resumePath(run.ID), "k-resume-again-0123456789", "")
		if m := p.refused(t, again.code, again.body, 409, "run_state_conflict"); m["details"].(map[string]any)["runStatus"] != "running" {
			t.Fatalf("a resume of a running run: %s", again.body)
		}
		// A paused run is cancelled.
		accepted(t, p.pause, f.post(t, pausePath(run.ID), "k-pause-2-0123456789abcdef", `{"drainPolicy":"immediate"}`), "paused")
		if c := f.post(t, "/runs/"+runs.ProjectID(run.ID)+"/cancel", "k-cancel-paused-0123456789", ""); c.code != 200 || !strings.Contains(c.body, `"cancelled"`) {
			t.Fatalf("cancel of a paused run: %d %s", c.code, c.body)
		}
		status, types = p.runReadsValid(t, f, run.ID)
		if status != "cancelled" || types[len(types)-1] != EventRunCancelled {
			t.Fatalf("after the cancel: %s %v", status, types)
		}
		for _, path := range []string{pausePath(run.ID), resumePath(run.ID)} {
			ended := f.post(t, path, "", "")
			p.refused(t, ended.code, ended.body, 409, "run_terminal")
		}
		// A pending run pauses too; the executor does not start it
		// (its status is no longer pending).
		pending := bulkRun(t, rs, "acme", runs.StatusPending)
		accepted(t, p.pause, f.post(t, pausePath(pending.ID), "", ""), "paused")
		if _, err := rs.Transition(context.Background(), pending.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err == nil {
			t.Fatal("a paused pending run was started")
		}
	})
}

// TestImmediatePauseEventIsValid: an immediate pause of a run executing a
// node records run.paused naming the node and attempt cut, valid against
// the closed payload schema.
func TestImmediatePauseEventIsValid(t *testing.T) {
	p := loadPauseOracle(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().UTC()
	r := runs.NewRun("acme", webhook.WorkflowReplaySideEffect, json.RawMessage(`{"delayMs":30000}`), now)
	if err := f.runs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	running, err := f.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.runs.AppendLog(ctx, r.ID, running.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "wait", At: now,
		Payload: json.RawMessage(`{"nodeId":"wait","typeId":"core.conformance.hold"}`)}}, now); err != nil {
		t.Fatal(err)
	}
	accepted(t, p.pause, f.post(t, pausePath(r.ID), "", `{"drainPolicy":"immediate"}`), "paused")
	p.runReadsValid(t, f, r.ID)
	pl := eventPayload(t, f, r.ID, runs.EventRunPaused)
	if pl["drainPolicy"] != "immediate" || pl["interruptedNodeId"] != "wait" || pl["interruptedAttempt"] != float64(1) {
		t.Fatalf("run.paused payload %v, want immediate, wait attempt 1 cut", pl)
	}
	// A drain pause of a run executing a node answers paused at once and
	// records run.paused only when the node ends.
	r2 := runs.NewRun("acme", webhook.WorkflowReplaySideEffect, json.RawMessage(`{"delayMs":30000}`), now)
	if err := f.runs.Create(ctx, r2); err != nil {
		t.Fatal(err)
	}
	run2, _ := f.runs.Transition(ctx, r2.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
	run2, _ = f.runs.AppendLog(ctx, r2.ID, run2.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "wait", At: now,
		Payload: json.RawMessage(`{"nodeId":"wait","typeId":"core.conformance.hold"}`)}}, now)
	accepted(t, p.pause, f.post(t, pausePath(r2.ID), "", ""), "paused")
	if status, types := p.runReadsValid(t, f, r2.ID); status != "paused" || types[len(types)-1] != runs.EventNodeStarted {
		t.Fatalf("draining: %s %v, want paused, no run.paused yet", status, types)
	}
	if _, err := f.runs.AppendLog(ctx, r2.ID, run2.Fence(), []runs.LogEvent{{Type: runs.EventNodeCompleted, NodeID: "wait", At: now,
		Payload: json.RawMessage(`{"nodeId":"wait","outputs":{}}`)}}, now); err != nil {
		t.Fatal(err)
	}
	if _, types := p.runReadsValid(t, f, r2.ID); types[len(types)-2] != runs.EventNodeCompleted || types[len(types)-1] != runs.EventRunPaused {
		t.Fatalf("drained: %v, want node.completed then run.paused", types)
	}
}

// TestPauseRefusesBadInput: a body outside the operations' closed schemas
// is 400 validation_error naming the field, before anything is written
// (never a 500); another tenant's run is 403 id_tenant_mismatch and an
// unknown one 404 not_found, as for cancelRun.
func TestPauseRefusesBadInput(t *testing.T) {
	p := loadPauseOracle(t)
	f := newFixture(t)
	run := bulkRun(t, f.runs, "acme", runs.StatusRunning)
	for _, c := range []struct{ path, body, field string }{
		{pausePath(run.ID), `{"drainPolicy":"drain"}`, "drainPolicy"},
		{pausePath(run.ID), `{"drainPolicy":""}`, "drainPolicy"},
		{pausePath(run.ID), `{"drainPolicy":5}`, "drainPolicy"},
		{pausePath(run.ID), `{"drainPolicy":null}`, "drainPolicy"},
		{pausePath(run.ID), `{"reason":7}`, "reason"},
		{pausePath(run.ID), `{"reason":"x","extra":1}`, "extra"},
		{pausePath(run.ID), `{"reason":"` + strings.Repeat("r", maxCancelReason+1) + `"}`, "reason"},
		{pausePath(run.ID), `[]`, ""},
		{pausePath(run.ID), `"immediate"`, ""},
		{pausePath(run.ID), `{`, ""},
		{resumePath(run.ID), `{"drainPolicy":"immediate"}`, "drainPolicy"},
		{resumePath(run.ID), `{"reason":false}`, "reason"},
		{resumePath(run.ID), `null`, ""},
	} {
		r := f.post(t, c.path, "k-bad-"+c.field+"-0123456789abcdef", c.body)
		m := p.refused(t, r.code, r.body, 400, "validation_error")
		if d, _ := m["details"].(map[string]any); c.field != "" && d["field"] != c.field {
			t.Errorf("%s %s: %s, want details.field %s", c.path, c.body, r.body, c.field)
		}
	}
	for _, path := range []string{pausePath(run.ID), resumePath(run.ID)} {
		big := f.post(t, path, "", `{"reason":"`+strings.Repeat("r", MaxBodyBytes)+`"}`)
		p.refused(t, big.code, big.body, 413, "payload_too_large")
	}
	if got, _ := f.runs.Get(context.Background(), run.ID); got.Status != runs.StatusRunning || got.Version != run.Version {
		t.Fatalf("refused requests changed the run: %+v", got)
	}
	other := bulkRun(t, f.runs, "globex", runs.StatusRunning)
	for _, path := range []string{pausePath(other.ID), resumePath(other.ID)} {
		r := f.post(t, path, "", "")
		p.refused(t, r.code, r.body, 403, "id_tenant_mismatch")
	}
	if got, _ := f.runs.Get(context.Background(), other.ID); got.Status != runs.StatusRunning {
		t.Fatalf("another tenant's run was paused: %+v", got)
	}
	for _, path := range []string{pausePath(runs.NewRunID("acme")), resumePath(runs.NewRunID("acme"))} {
		r := f.post(t, path, "", "")
		p.refused(t, r.code, r.body, 404, "not_found")
	}
}

// TestPauseRetriedAfterCrashKeepsIts202: a keyed pause (and resume) that
// wrote the run and died before its Layer-1 record was completed is
// retried, after the lease, under the same key: it finds its own write and
// answers 202 again, never 409 run_state_conflict. In memory and on every
// emulator.
func TestPauseRetriedAfterCrashKeepsIts202(t *testing.T) {
	p := loadPauseOracle(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now())
		st := &lostCompletion{Store: inner}
		f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, nil)
		run := bulkRun(t, rs, "acme", runs.StatusRunning)
		const key = "k-pause-crash-0123456789abcdef"
		f.post(t, pausePath(run.ID), key, "")
		clk.Advance(idem.DefaultLease + time.Second)
		accepted(t, p.pause, f.post(t, pausePath(run.ID), key, ""), "paused")
		if got, _ := rs.Get(context.Background(), run.ID); got.Version != run.Version+1 {
			t.Fatalf("the retry paused again: version %d, want %d", got.Version, run.Version+1)
		}
	})
}

// TestPauseRetriedAfterCrashAndAResume: a keyed pause that wrote the run
// and died before its Layer-1 record was completed, then another
// request's resume: the pause's retry under its key answers 202 again and
// does not pause the resumed run a second time (RED_TEAM 376). In memory
// and on every emulator.
func TestPauseRetriedAfterCrashAndAResume(t *testing.T) {
	p := loadPauseOracle(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now())
		st := &lostCompletion{Store: inner}
		f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, nil)
		run := bulkRun(t, rs, "acme", runs.StatusRunning)
		const key = "k-pause-crash-resumed-0123456789ab"
		f.post(t, pausePath(run.ID), key, "")
		if _, err := rs.(runs.PauseStore).Unpause(context.Background(), run.ID, "another-resume", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		clk.Advance(idem.DefaultLease + time.Second)
		accepted(t, p.pause, f.post(t, pausePath(run.ID), key, ""), "paused")
		if got, _ := rs.Get(context.Background(), run.ID); got.Status != runs.StatusRunning || got.Version != run.Version+2 {
			t.Fatalf("the retry after a resume: %s, version %d; want running at %d (paused once, resumed once)", got.Status, got.Version, run.Version+2)
		}
	})
}

// TestPauseLimitIs409: a run paused and resumed runs.MaxPauses times
// refuses the next pause 409 run_state_conflict (its details naming the
// running status and the bound), changing nothing; it is still cancelled
// (RED_TEAM 378).
func TestPauseLimitIs409(t *testing.T) {
	p := loadPauseOracle(t)
	f := newFixture(t)
	run := bulkRun(t, f.runs, "acme", runs.StatusRunning)
	ctx := context.Background()
	for i := range runs.MaxPauses {
		if _, err := f.runs.Pause(ctx, run.ID, runs.Pause{By: "p" + strconv.Itoa(i)}, time.Now()); err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
		if _, err := f.runs.Unpause(ctx, run.ID, "r"+strconv.Itoa(i), "", time.Now()); err != nil {
			t.Fatalf("resume %d: %v", i, err)
		}
	}
	before, _ := f.runs.Get(ctx, run.ID)
	r := f.post(t, pausePath(run.ID), "k-pause-limit-0123456789abcdef", "")
	m := p.refused(t, r.code, r.body, 409, "run_state_conflict")
	if d, _ := m["details"].(map[string]any); d["runStatus"] != "running" || d["maxPauses"] != float64(runs.MaxPauses) {
		t.Fatalf("a pause past the bound: %s", r.body)
	}
	if got, _ := f.runs.Get(ctx, run.ID); got.Version != before.Version || got.Status != runs.StatusRunning {
		t.Fatalf("the refused pause changed the run: %s at %d", got.Status, got.Version)
	}
	if c := f.post(t, "/runs/"+runs.ProjectID(run.ID)+"/cancel", "k-cancel-limit-0123456789", ""); c.code != 200 {
		t.Fatalf("cancel after the bound: %d %s", c.code, c.body)
	}
}

// TestPauseResumeRoundTrips pins each of pauseRun and resumeRun to two
// RunsTable round trips (a consistent read of the run, which the drain
// policy needs, and the conditional write) under a Layer 1 kept elsewhere.
func TestPauseResumeRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, rs, idem.Config{Store: idemmem.New()}, nil)
		run := bulkRun(t, rs, "acme", runs.StatusRunning)
		for i, path := range []string{pausePath(run.ID), resumePath(run.ID)} {
			cnt.Reset()
			if r := f.post(t, path, "k-trips-"+strconv.Itoa(i)+"-0123456789abcdef", ""); r.code != 202 {
				t.Fatalf("%s: %d %s", path, r.code, r.body)
			}
			if n, ops := cnt.Total(), cnt.Ops(); n != 2 || ops["GetItem"] != 1 || ops["UpdateItem"] != 1 {
				t.Errorf("%s took %d round trips %v, want 2 (a GetItem and an UpdateItem)", path, n, ops)
			}
		}
	})
}

// TestBulkCancelOfAPausedRun: bulkCancelRuns cancels a paused run as
// cancelRun does (only a resume or a cancel moves a paused run on).
func TestBulkCancelOfAPausedRun(t *testing.T) {
	o := wireschema.Load(t)
	f := newFixture(t)
	run := bulkRun(t, f.runs, "acme", runs.StatusRunning)
	if r := f.post(t, pausePath(run.ID), "", ""); r.code != 202 {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	r, _ := f.do(t, ev("POST", bulkPath, "acme", "k-bulk-paused-0123456789abcdef", bulkBody("", run.ID)))
	if got := bulkAnswer(t, o, r.StatusCode, r.Body); len(got) != 1 || !got[0].OK || got[0].Status != "cancelled" {
		t.Fatalf("bulk cancel of a paused run: %s", r.Body)
	}
	if got, _ := f.runs.Get(context.Background(), run.ID); got.Status != runs.StatusCancelled {
		t.Fatalf("run %s, want cancelled", got.Status)
	}
}

// TestCancelWhileDrainingShowsThePause: a run paused to let its node
// drain and cancelled before the node ended still shows its run.paused,
// after its log and before run.cancelled, valid against the closed
// schemas; the cancelled run's events never change after.
func TestCancelWhileDrainingShowsThePause(t *testing.T) {
	p := loadPauseOracle(t)
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		ctx := context.Background()
		now := time.Now().UTC()
		run := bulkRun(t, rs, "acme", runs.StatusRunning)
		logs := rs.(runs.LogStore)
		if _, err := logs.AppendLog(ctx, run.ID, run.Fence(), []runs.LogEvent{{Type: runs.EventNodeStarted, NodeID: "wait", At: now,
			Payload: json.RawMessage(`{"nodeId":"wait","typeId":"core.conformance.hold"}`)}}, now); err != nil {
			t.Fatal(err)
		}
		accepted(t, p.pause, f.post(t, pausePath(run.ID), "", `{"reason":"hold on"}`), "paused")
		if c := f.post(t, "/runs/"+runs.ProjectID(run.ID)+"/cancel", "", ""); c.code != 200 {
			t.Fatalf("cancel: %d %s", c.code, c.body)
		}
		status, types := p.runReadsValid(t, f, run.ID)
		if n := len(types); status != "cancelled" || n < 3 || types[n-3] != runs.EventNodeStarted || types[n-2] != runs.EventRunPaused || types[n-1] != EventRunCancelled {
			t.Fatalf("after a cancel while draining: %s %v, want node.started, run.paused, run.cancelled", status, types)
		}
		if pl := eventPayload(t, f, run.ID, runs.EventRunPaused); pl["reason"] != "hold on" || pl["drainPolicy"] != "drain-current-node" {
			t.Fatalf("run.paused payload %v", pl)
		}
	})
}
