package apifn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// sourceRun stores a run of the looped fixture that executed its nodes
// (start, effect, hold, effect) and, when terminal, ended with status:
// events 0 run.started, 1..8 node events, 9 the terminal event.
func sourceRun(t *testing.T, f *fixture, tenant string, status runs.Status) runs.Run {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	r := runs.NewRun(tenant, webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":1}`), now)
	if err := f.runs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	running, err := f.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
	if err != nil {
		t.Fatal(err)
	}
	var evs []runs.LogEvent
	for i, node := range []string{"start", "effect", "hold", "effect"} {
		at := now.Add(time.Duration(i+1) * time.Millisecond)
		evs = append(evs,
			runs.LogEvent{Type: runs.EventNodeStarted, NodeID: node, At: at, Payload: json.RawMessage(`{"nodeId":"` + node + `","typeId":"x"}`)},
			runs.LogEvent{Type: runs.EventNodeCompleted, NodeID: node, At: at, Payload: json.RawMessage(`{"nodeId":"` + node + `","outputs":{},"x-idemkit-effect":"<performed & kept>"}`)})
	}
	if _, err := f.runs.AppendLog(ctx, r.ID, running.Fence(), evs, now); err != nil {
		t.Fatal(err)
	}
	if status != runs.StatusRunning {
		if _, err := f.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, status, "", now.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.runs.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func forkPath(runID string) string { return "/runs/" + runs.ProjectID(runID) + ":fork" }

// fork posts a forkRun request as tenant acme.
func (f *fixture) fork(t *testing.T, runID, key, body string) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	return f.do(t, ev("POST", forkPath(runID), "acme", key, body))
}

// TestForkRunRefusals: every refusal of forkRun with the status and code
// the fork documents give it, and no run created by any of them.
func TestForkRunRefusals(t *testing.T) {
	f := newFixture(t)
	done := sourceRun(t, f, "acme", runs.StatusCompleted) // terminal event at 9
	live := sourceRun(t, f, "acme", runs.StatusRunning)   // last event 8, no terminal yet
	other := sourceRun(t, f, "other", runs.StatusCompleted)
	before := f.runs.Len()
	cases := []struct {
		name, runID, body string
		status            int
		code, field       string
	}{
		{"not an object", done.ID, `[1]`, 400, "validation_error", ""},
		{"trailing data", done.ID, `{"mode":"replay"} {}`, 400, "validation_error", ""},
		{"unknown member", done.ID, `{"mode":"replay","from":1}`, 400, "validation_error", "from"},
		{"mode missing", done.ID, `{"fromSeq":1}`, 400, "validation_error", "mode"},
		{"mode outside the enum", done.ID, `{"mode":"none"}`, 400, "validation_error", "mode"},
		{"fromSeq negative", done.ID, `{"mode":"replay","fromSeq":-1}`, 400, "validation_error", "fromSeq"},
		{"fromSeq fractional", done.ID, `{"mode":"replay","fromSeq":1.5}`, 400, "validation_error", "fromSeq"},
		{"fromSeq barely fractional", done.ID, `{"mode":"replay","fromSeq":1.00000000000000000001}`, 400, "validation_error", "/fromSeq"},
		{"fromSeq with a huge exponent", done.ID, `{"mode":"replay","fromSeq":1e99999999}`, 400, "validation_error", ""},
		{"fromSeq with a tiny exponent", done.ID, `{"mode":"replay","fromSeq":1e-99999999}`, 400, "validation_error", ""},
		{"fromSeq a string", done.ID, `{"mode":"replay","fromSeq":"1"}`, 400, "validation_error", "fromSeq"},
		{"fromSeq null", done.ID, `{"mode":"replay","fromSeq":null}`, 400, "validation_error", "fromSeq"},
		{"fromSeq past 2^53-1", done.ID, `{"mode":"replay","fromSeq":9007199254740992}`, 400, "validation_error", "fromSeq"},
		{"branch without fromSeq", done.ID, `{"mode":"branch"}`, 400, "validation_error", "fromSeq"},
		{"replay with an overlay", done.ID, `{"mode":"replay","runOptionsOverlay":{"tags":["x"]}}`, 400, "validation_error", "runOptionsOverlay"},
		{"branch with an overlay this host cannot apply", done.ID, `{"mode":"branch","fromSeq":1,"runOptionsOverlay":{"tags":["x"]}}`, 400, "validation_error", "runOptionsOverlay"},
		{"overlay not an object", done.ID, `{"mode":"branch","fromSeq":1,"runOptionsOverlay":[]}`, 400, "validation_error", "runOptionsOverlay"},
		{"fromSeq past the terminal event", done.ID, `{"mode":"replay","fromSeq":10}`, 422, CodeForkPointInvalid, ""},
		{"branch past the terminal event", done.ID, `{"mode":"branch","fromSeq":11}`, 422, CodeForkPointInvalid, ""},
		{"fromSeq absent from a live log", live.ID, `{"mode":"replay","fromSeq":9}`, 422, CodeForkPointInvalid, ""},
		{"a run of the caller's tenant that does not exist", "acme/AAAAAAAAAAAAAAAAAAAAAA", `{"mode":"replay"}`, 404, "not_found", ""},
		{"another tenant's run", other.ID, `{"mode":"replay"}`, 403, "id_tenant_mismatch", ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, m := f.fork(t, c.runID, "k-refusal-"+strings.Repeat("x", 16)+string(rune('a'+i)), c.body)
			if r.StatusCode != c.status || m["error"] != c.code || m["message"] == nil || m["message"] == "" {
				t.Fatalf("%d %s, want %d %s", r.StatusCode, r.Body, c.status, c.code)
			}
			if c.field != "" {
				if d, _ := m["details"].(map[string]any); d["field"] != c.field {
					t.Fatalf("details %v, want field %s", m["details"], c.field)
				}
			}
			if c.status == 422 {
				d, _ := m["details"].(map[string]any)
				if d["sourceRunId"] != c.runID || d["fromSeq"] == nil || d["boundary"] == nil {
					t.Fatalf("422 details %v: want sourceRunId, fromSeq, boundary", d)
				}
			}
		})
	}
	// The fork point at the terminal event itself is the last accepted one
	// (the fork inherits everything before the terminal event).
	if r, m := f.fork(t, done.ID, "k-at-the-terminal-event-0001", `{"mode":"replay","fromSeq":9}`); r.StatusCode != 201 || m["fromSeq"] != 9.0 {
		t.Fatalf("fromSeq at the terminal event: %d %s", r.StatusCode, r.Body)
	}
	// A JSON integer may be written with a zero fraction or an exponent
	// (JSON Schema's integer is a mathematical one): 9.0 and 0.9e1 are 9.
	for i, body := range []string{`{"mode":"replay","fromSeq":9.0}`, `{"mode":"replay","fromSeq":0.9e1}`} {
		if r, m := f.fork(t, done.ID, "k-integral-number-form-000"+string(rune('a'+i)), body); r.StatusCode != 201 || m["fromSeq"] != 9.0 {
			t.Fatalf("%s: %d %s", body, r.StatusCode, r.Body)
		}
	}
	if got := f.runs.Len(); got != before+3 {
		t.Fatalf("%d runs created, want 3 (the accepted forks only)", got-before)
	}
	// No credential: 401 before anything is read. The key is optional
	// (as on createRun): a keyless fork is a new fork each time.
	if r, m := f.do(t, ev("POST", forkPath(done.ID), "", "k-no-credential-0000000001", `{"mode":"replay"}`)); r.StatusCode != 401 || m["error"] != "unauthenticated" {
		t.Fatalf("no credential: %d %s", r.StatusCode, r.Body)
	}
	r1, m1 := f.do(t, ev("POST", forkPath(done.ID), "acme", "", `{"mode":"replay"}`))
	r2, m2 := f.do(t, ev("POST", forkPath(done.ID), "acme", "", `{"mode":"replay"}`))
	if r1.StatusCode != 201 || r2.StatusCode != 201 || m1["runId"] == m2["runId"] {
		t.Fatalf("no Idempotency-Key: %d %s / %d %s", r1.StatusCode, r1.Body, r2.StatusCode, r2.Body)
	}
}

// TestForkRunPastRetentionIsRefused: a source older than the fork retention
// is refused 422 with details {sourceRunId, fromSeq, boundary}.
func TestForkRunPastRetentionIsRefused(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	f.h.clock = ledgertest.ClockFuncs{NowFunc: func() time.Time { return src.CreatedAt.Add(DefaultForkRetention + time.Minute) }, SleepFunc: f.h.clock.Sleep}
	r, m := f.fork(t, src.ID, "k-past-retention-000000001", `{"mode":"replay","fromSeq":3}`)
	d, _ := m["details"].(map[string]any)
	if r.StatusCode != 422 || m["error"] != CodeForkPointInvalid || d["sourceRunId"] != src.ID || d["fromSeq"] != 3.0 || d["boundary"] == nil {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
}

// TestForkRunDefaultsAndCreatedBody: a replay without fromSeq defaults to
// 0; the 201 is {runId, sourceRunId, fromSeq, mode, status, eventsUrl}
// with Location, valid against the OpenAPI document, and the fork is a
// run of the caller's tenant with the source's workflow and inputs.
func TestForkRunDefaultsAndCreatedBody(t *testing.T) {
	o := wireschema.Load(t)
	sch, _, err := o.Response("POST", "/runs/{runId}:fork", 201)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	for i, c := range []struct {
		body    string
		mode    string
		fromSeq float64
	}{
		{`{"mode":"replay"}`, "replay", 0},
		{`{"mode":"replay","runOptionsOverlay":{}}`, "replay", 0},
		{`{"mode":"replay","fromSeq":4}`, "replay", 4},
		{`{"mode":"branch","fromSeq":0}`, "branch", 0},
		{`{"mode":"branch","fromSeq":5,"runOptionsOverlay":{}}`, "branch", 5},
	} {
		key := "k-defaults-" + strings.Repeat("0", 12) + c.mode + string(rune('a'+i))
		r, m := f.fork(t, src.ID, key, c.body)
		if r.StatusCode != 201 {
			t.Fatalf("%s: %d %s", c.body, r.StatusCode, r.Body)
		}
		if err := wireschema.Validate(sch, []byte(r.Body)); err != nil {
			t.Fatalf("%s: the 201 body does not match the OpenAPI document: %v\n%s", c.body, err, r.Body)
		}
		id, _ := m["runId"].(string)
		if m["sourceRunId"] != src.ID || m["mode"] != c.mode || m["fromSeq"] != c.fromSeq || m["status"] != "pending" ||
			!runs.ValidRunID(id) || runs.RunTenant(id) != "acme" || id == src.ID {
			t.Fatalf("%s: %s", c.body, r.Body)
		}
		base := "https://api.example.com/runs/" + runs.ProjectID(id)
		if m["eventsUrl"] != base+"/events" || header.First(r.Headers, "Location") != base {
			t.Fatalf("%s: eventsUrl %v, Location %q", c.body, m["eventsUrl"], header.First(r.Headers, "Location"))
		}
		fork, err := f.runs.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		// A replay keeps the source's node events from fromSeq to compare
		// its re-execution with (divergence); a branch none.
		wantRec := 0
		if c.mode == "replay" {
			wantRec = 8 - max(int(c.fromSeq), 1) + 1 // node events at 1..8
		}
		if len(fork.Fork.Recorded) != wantRec || fork.Fork.SourceComplete != (c.mode == "replay") {
			t.Fatalf("%s: %d recorded events (complete %v), want %d", c.body, len(fork.Fork.Recorded), fork.Fork.SourceComplete, wantRec)
		}
		if wantRec > 0 {
			var first struct {
				EventID string `json:"eventId"`
			}
			srcEvs := rawEvents(t, f, src.ID)
			_ = json.Unmarshal(srcEvs[fork.Fork.Recorded[0].Sequence], &first)
			if fork.Fork.Recorded[0].EventID != first.EventID {
				t.Fatalf("%s: recorded event id %s, the source serves %s", c.body, fork.Fork.Recorded[0].EventID, first.EventID)
			}
		}
		if fork.WorkflowID != src.WorkflowID || !bytes.Equal(fork.Inputs, src.Inputs) || fork.Fork == nil ||
			fork.Fork.SourceRunID != src.ID || string(fork.Fork.Mode) != c.mode || float64(fork.Fork.FromSeq) != c.fromSeq {
			t.Fatalf("%s: fork %+v", c.body, fork)
		}
	}
}

// TestForkRunKeyReplaysTheSameFork: a fork request retried with its key is
// the same fork (replayed, one run); the key with another body is refused
// as a mismatch and creates nothing.
func TestForkRunKeyReplaysTheSameFork(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	const key = "k-fork-replay-0000000000001"
	body := `{"mode":"replay","fromSeq":3}`
	r1, m1 := f.fork(t, src.ID, key, body)
	n := f.runs.Len()
	r2, m2 := f.fork(t, src.ID, key, body)
	if r1.StatusCode != 201 || r2.StatusCode != 201 || m1["runId"] != m2["runId"] || r1.Body != r2.Body {
		t.Fatalf("%d %s / %d %s", r1.StatusCode, r1.Body, r2.StatusCode, r2.Body)
	}
	if header.First(r1.Headers, "OpenWOP-Idempotent-Replay") != "" || header.First(r2.Headers, "OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay markers %q %q", header.First(r1.Headers, "OpenWOP-Idempotent-Replay"), header.First(r2.Headers, "OpenWOP-Idempotent-Replay"))
	}
	r3, m3 := f.fork(t, src.ID, key, `{"mode":"branch","fromSeq":3}`)
	if r3.StatusCode != 409 || m3["error"] != "idempotency_key_mismatch" {
		t.Fatalf("other body under the key: %d %s", r3.StatusCode, r3.Body)
	}
	if f.runs.Len() != n {
		t.Fatalf("%d runs after the retry and the mismatch, want %d", f.runs.Len(), n)
	}
	// The same key on another source's fork route is another request
	// (the path parameter scopes the record), so it does not replay the first fork.
	src2 := sourceRun(t, f, "acme", runs.StatusCompleted)
	if r4, m4 := f.fork(t, src2.ID, key, body); r4.StatusCode == 201 && m4["runId"] == m1["runId"] {
		t.Fatalf("the key on another source replayed the first fork: %s", r4.Body)
	}
}

// rawEvents reads a run's events through pollRunEvents, each as the bytes
// served.
func rawEvents(t *testing.T, f *fixture, runID string) []json.RawMessage {
	t.Helper()
	r, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(runID)+"/events/poll", "acme", "", ""))
	if r.StatusCode != 200 {
		t.Fatalf("poll %s: %d %s", runID, r.StatusCode, r.Body)
	}
	var body struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
		t.Fatal(err)
	}
	return body.Events
}

// asForkServes is the event ev that run srcID serves as the run id serves
// it in its fixed history: the same bytes under id's runId and with id's
// own eventId for its sequence (TestForkEventIDsAreTheForksOwn).
func asForkServes(t *testing.T, ev json.RawMessage, srcID, id string) json.RawMessage {
	t.Helper()
	var e struct {
		Sequence int64 `json:"sequence"`
	}
	if err := json.Unmarshal(ev, &e); err != nil {
		t.Fatal(err)
	}
	quote := func(s string) []byte { b, _ := json.Marshal(s); return b }
	out := bytes.Replace(ev, quote(eventID(srcID, e.Sequence)), quote(eventID(id, e.Sequence)), 1)
	return bytes.Replace(out, quote(srcID), quote(id), 1)
}

// TestForkRunPrefixIsByteEquivalent: the fork's events with sequence <
// fromSeq are the source's, byte for byte as served (the runId, which
// names the run read, and the eventId, which is the fork's own, aside),
// for every fork point of both modes; the event at fromSeq is not
// inherited.
func TestForkRunPrefixIsByteEquivalent(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	srcEvs := rawEvents(t, f, src.ID)
	if len(srcEvs) != 10 {
		t.Fatalf("source has %d events, want 10", len(srcEvs))
	}
	for _, mode := range []string{"replay", "branch"} {
		for from := 1; from <= 9; from++ {
			key := "k-prefix-" + mode + "-" + strings.Repeat("0", 12) + string(rune('a'+from))
			r, m := f.fork(t, src.ID, key, `{"mode":"`+mode+`","fromSeq":`+string(rune('0'+from))+`}`)
			if r.StatusCode != 201 {
				t.Fatalf("%s from %d: %d %s", mode, from, r.StatusCode, r.Body)
			}
			forkID, _ := m["runId"].(string)
			got := rawEvents(t, f, forkID)
			if len(got) != from {
				t.Fatalf("%s from %d: the fork serves %d events before it runs, want %d (the prefix)", mode, from, len(got), from)
			}
			for i := 0; i < from; i++ {
				if want := asForkServes(t, srcEvs[i], src.ID, forkID); !bytes.Equal(got[i], want) {
					t.Fatalf("%s from %d: event %d differs:\n fork   %s\n source %s", mode, from, i, got[i], srcEvs[i])
				}
			}
		}
	}
}

// TestEffectSeamManifestMatchesItsSchema: GET /host/effect-seams is valid
// against the effect-seam manifest schema (through the OpenAPI document),
// one guarded row per outbound path the executor can reach.
func TestEffectSeamManifestMatchesItsSchema(t *testing.T) {
	o := wireschema.Load(t)
	f := newFixture(t)
	r, m := f.do(t, ev("GET", "/host/effect-seams", "acme", "", ""))
	if r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, r.Body)
	}
	for _, name := range []string{"", "effect-seam-manifest.schema.json"} {
		sch, err := o.Schema(name)
		if name == "" {
			sch, _, err = o.Response("GET", "/host/effect-seams", 200)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := wireschema.Validate(sch, []byte(r.Body)); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, r.Body)
		}
	}
	seams, _ := m["seams"].([]any)
	names := map[string]bool{}
	for _, s := range seams {
		row, _ := s.(map[string]any)
		names[row["seam"].(string)] = true
		if row["guarded"] != true || row["guardedBy"] == "" || row["branchReFires"] != true {
			t.Fatalf("row %v", row)
		}
	}
	for _, want := range []string{webhook.SeamWebhookDeliver, webhook.SeamSideEffect} {
		if !names[want] {
			t.Fatalf("manifest %s lacks seam %s", r.Body, want)
		}
	}
}

// TestForkOfAForkKeepsTheRecordedHistory: a fork of a fork serves the
// fixed history the first fork inherited byte for byte (under its own
// runId and eventIds), keeps the
// original's recipe stamps for it, and records its ancestry (the first
// fork, then the original) so each recorded execution is resolved under
// the stamps it was recorded with.
func TestForkOfAForkKeepsTheRecordedHistory(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	_, m1 := f.fork(t, src.ID, "k-fork-of-fork-first-00001", `{"mode":"branch","fromSeq":5}`)
	first, _ := m1["runId"].(string)
	r2, m2 := f.fork(t, first, "k-fork-of-fork-second-0001", `{"mode":"replay","fromSeq":3}`)
	if r2.StatusCode != 201 {
		t.Fatalf("%d %s", r2.StatusCode, r2.Body)
	}
	second, _ := m2["runId"].(string)
	srcEvs, got := rawEvents(t, f, src.ID), rawEvents(t, f, second)
	if len(got) != 3 {
		t.Fatalf("%d events, want the 3 of the prefix", len(got))
	}
	for i := range got {
		if want := asForkServes(t, srcEvs[i], src.ID, second); !bytes.Equal(got[i], want) {
			t.Fatalf("event %d:\n fork of fork %s\n original     %s", i, got[i], srcEvs[i])
		}
	}
	run, err := f.runs.Get(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	a := run.Fork.Ancestry
	if run.Stamps != src.Stamps || len(a) != 2 || a[0].RunID != first || a[0].Mode != runs.ForkBranch ||
		a[0].Inherited["effect"] != 1 || a[1].RunID != src.ID || a[1].Mode != "" {
		t.Fatalf("stamps %+v, ancestry %+v", run.Stamps, a)
	}
}

// TestSeqOf: fromSeq's reader takes an integral value in any JSON number
// form exactly, and refuses a fraction, a value past int64, and a number
// too long or with too large an exponent to be worth exact arithmetic
// (1e99999999 would be a 100-million-digit integer), without doing it.
func TestSeqOf(t *testing.T) {
	for in, want := range map[string]int64{"9": 9, "9.0": 9, "0.9e1": 9, "90e-1": 9, "-0.0": 0, "9007199254740991": 1<<53 - 1} {
		if got, err := seqOf(json.Number(in)); err != nil || got != want {
			t.Errorf("seqOf(%s) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"1.5", "1e99999999", "1e-99999999", "1e101", "9223372036854775808", "1" + strings.Repeat("0", 70)} {
		if got, err := seqOf(json.Number(in)); err == nil {
			t.Errorf("seqOf(%s) = %d, want an error", in, got)
		}
	}
}

// TestForkEventIDsAreTheForksOwn: every event a fork serves has an eventId
// of the fork's own, its fixed history's included, so no two events of a
// source and its forks (a fork of a fork among them) share one: the run
// event schema's eventId is globally unique, and the runs chapter counts
// it among the run-scoped fields, with runId and timestamp. A consumer
// keeping events by eventId keeps the fork's history beside the source's,
// never one over the other. Failed before: a fork's inherited events
// carried the source's eventIds.
func TestForkEventIDsAreTheForksOwn(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	_, m1 := f.fork(t, src.ID, "k-event-ids-first-fork-0001", `{"mode":"branch","fromSeq":5}`)
	first, _ := m1["runId"].(string)
	_, m2 := f.fork(t, first, "k-event-ids-second-fork-001", `{"mode":"replay","fromSeq":3}`)
	second, _ := m2["runId"].(string)
	if first == "" || second == "" {
		t.Fatalf("forks not created: %v %v", m1, m2)
	}
	seen := map[string]string{}
	for _, id := range []string{src.ID, first, second} {
		for _, raw := range rawEvents(t, f, id) {
			var e RunEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			if where, dup := seen[e.EventID]; dup {
				t.Fatalf("eventId %s is served by %s (sequence %d) and by %s", e.EventID, id, e.Sequence, where)
			}
			seen[e.EventID] = fmt.Sprintf("%s (sequence %d)", id, e.Sequence)
			if want := eventID(id, e.Sequence); e.EventID != want {
				t.Fatalf("%s sequence %d: eventId %s, want the run's own %s", id, e.Sequence, e.EventID, want)
			}
		}
	}
	if len(seen) != 10+5+3 {
		t.Fatalf("%d events, want 18 (10 of the source, the 5 and 3 of the forks' history)", len(seen))
	}
}
