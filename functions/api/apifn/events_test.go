package apifn

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/shared"
)

// sseFrame is one dispatched SSE event, parsed as an EventSource would
// (HTML Living Standard §9.2.6): `field: value` lines, a single leading
// space stripped, data lines joined by LF, a blank line dispatches.
type sseFrame struct {
	ID, Event, Data string
	HasID           bool
}

type sseStream struct {
	Frames   []sseFrame
	Retry    string
	Comments []string
}

func parseSSE(t *testing.T, body string) sseStream {
	t.Helper()
	var s sseStream
	if body != "" && !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	if strings.Contains(body, "\r") {
		t.Fatalf("stream has CR: %q", body)
	}
	var cur sseFrame
	var data []string
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		if line == "" {
			if len(data) > 0 {
				cur.Data = strings.Join(data, "\n")
				s.Frames = append(s.Frames, cur)
			}
			cur, data = sseFrame{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			s.Comments = append(s.Comments, line)
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			cur.ID, cur.HasID = value, true
		case "event":
			cur.Event = value
		case "data":
			data = append(data, value)
		case "retry":
			s.Retry = value
		default:
			t.Fatalf("unknown SSE field %q", line)
		}
	}
	return s
}

// eventsReq is GET /runs/{runId}/events with an optional query and
// Last-Event-ID.
func eventsReq(rawPath, tenant, query, lastID string) events.APIGatewayV2HTTPRequest {
	e := ev("GET", rawPath, tenant, "", "")
	e.RawQueryString = query
	if lastID != "" {
		e.Headers["last-event-id"] = lastID
	}
	return e
}

func (f *fixture) stream(t *testing.T, e events.APIGatewayV2HTTPRequest) sseStream {
	t.Helper()
	r, err := f.h.Handle(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != 200 || r.Headers["Content-Type"] != "text/event-stream" || r.Headers["OpenWOP-Version"] == "" || r.IsBase64Encoded {
		t.Fatalf("%s?%s: %d %v %q", e.RawPath, e.RawQueryString, r.StatusCode, r.Headers, r.Body)
	}
	return parseSSE(t, r.Body)
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newRun stores a pending run of tenant created at t0.
func (f *fixture) newRun(t *testing.T, tenant string) runs.Run {
	t.Helper()
	r := runs.NewRun(tenant, "conformance-noop", json.RawMessage(`{"secret":"s3cr3t"}`), t0)
	if err := f.runs.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (f *fixture) move(t *testing.T, id string, from runs.Status, to runs.Status, msg string, at time.Time) {
	t.Helper()
	if _, err := f.runs.Transition(context.Background(), id, []runs.Status{from}, to, msg, at); err != nil {
		t.Fatal(err)
	}
}

// eventDoc decodes a frame's data as a RunEventDoc and checks the closed
// envelope: exactly the seven required keys, the id grammars of
// ids.schema.json, schemaVersion 1.
func eventDoc(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("data is not JSON: %v: %s", err, data)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	want := []string{"eventId", "payload", "runId", "schemaVersion", "sequence", "timestamp", "type"}
	if len(keys) != len(want) {
		t.Fatalf("RunEventDoc keys %v, want %v", keys, want)
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Fatalf("RunEventDoc lacks %s: %s", k, data)
		}
	}
	if !idPattern(t, "eventId").MatchString(m["eventId"].(string)) || !idPattern(t, "runId").MatchString(m["runId"].(string)) {
		t.Fatalf("eventId/runId outside ids.schema.json: %s", data)
	}
	if _, err := time.Parse(time.RFC3339Nano, m["timestamp"].(string)); err != nil || m["schemaVersion"] != 1.0 {
		t.Fatalf("timestamp/schemaVersion: %s", data)
	}
	return m
}

var (
	idsOnce sync.Once
	idsDefs map[string]struct {
		Pattern string `json:"pattern"`
	}
)

// idPattern is a grammar of the reference ids.schema.json (the Go regexp
// syntax covers these patterns).
func idPattern(t *testing.T, name string) *regexp.Regexp {
	t.Helper()
	idsOnce.Do(func() {
		b, err := os.ReadFile(shared.Path(t, "openwop", "schemas", "v2", "ids.schema.json"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Defs map[string]struct {
				Pattern string `json:"pattern"`
			} `json:"$defs"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		idsDefs = doc.Defs
	})
	return regexp.MustCompile(idsDefs[name].Pattern)
}

// TestEventsLifecycle follows one run from creation to its end, re-polling
// with Last-Event-ID as an EventSource does: every event arrives exactly
// once, in sequence order, and the stream ends with the terminal event.
func TestEventsLifecycle(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	path := "/runs/" + runs.ProjectID(r.ID) + "/events"

	// pending: run.started only; the stream tells the client to come back.
	s := f.stream(t, eventsReq(path, "acme", "", ""))
	if len(s.Frames) != 1 || s.Retry != strconv.Itoa(EventsRetryMs) || len(s.Comments) == 0 {
		t.Fatalf("pending run: %+v", s)
	}
	fr := s.Frames[0]
	if fr.ID != "0" || fr.Event != EventRunStarted {
		t.Fatalf("first frame %+v", fr)
	}
	d := eventDoc(t, fr.Data)
	if d["sequence"] != 0.0 || d["type"] != EventRunStarted || d["runId"] != r.ID || d["timestamp"] != "2026-03-01T12:00:00Z" ||
		!reflect.DeepEqual(d["payload"], map[string]any{"workflowId": "conformance-noop", "transport": "rest",
			"owner": map[string]any{"tenant": "acme", "subject": map[string]any{"issuer": "urn:idemkit:api-key", "kind": "workload", "lane": "api-key", "subjectId": "acme", "tenant": "acme"}}}) {
		t.Fatalf("run.started %v", d)
	}
	if strings.Contains(fr.Data, "s3cr3t") {
		t.Fatal("the event echoes the run's inputs")
	}
	started := fr.Data

	// Re-poll after 0: nothing new while the run is running.
	f.move(t, r.ID, runs.StatusPending, runs.StatusRunning, "", t0.Add(time.Second))
	if s := f.stream(t, eventsReq(path, "acme", "", "0")); len(s.Frames) != 0 || s.Retry == "" {
		t.Fatalf("running run after 0: %+v", s)
	}
	// A failure noted on a running run changes no event.
	if _, err := f.runs.NoteFailure(context.Background(), r.ID, "effect in flight", t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := f.stream(t, eventsReq(path, "acme", "", "")); len(s.Frames) != 1 || s.Frames[0].Data != started {
		t.Fatalf("event 0 changed: %+v", s)
	}

	// completed: re-poll after 0 yields exactly the terminal event, and no
	// retry hint: the stream is over.
	f.move(t, r.ID, runs.StatusRunning, runs.StatusCompleted, "", t0.Add(1500*time.Millisecond+3*time.Second))
	s = f.stream(t, eventsReq(path, "acme", "", "0"))
	if len(s.Frames) != 1 || s.Retry != "" || s.Frames[0].ID != "1" || s.Frames[0].Event != EventRunCompleted {
		t.Fatalf("completed run after 0: %+v", s)
	}
	d = eventDoc(t, s.Frames[0].Data)
	if d["sequence"] != 1.0 || d["timestamp"] != "2026-03-01T12:00:04.5Z" ||
		!reflect.DeepEqual(d["payload"], map[string]any{"outputs": map[string]any{}, "durationMs": 4500.0}) {
		t.Fatalf("run.completed %v", d)
	}
	// After the terminal event: an empty 200 stream; past the end as well.
	for _, last := range []string{"1", "2", "999999999999"} {
		if s := f.stream(t, eventsReq(path, "acme", "", last)); len(s.Frames) != 0 || s.Retry != "" {
			t.Fatalf("after %s: %+v", last, s)
		}
	}
	// From the start: the whole log, in order, and byte-identical on every
	// read (stable eventIds, never renumbered).
	full := f.stream(t, eventsReq(path, "acme", "", ""))
	if len(full.Frames) != 2 || full.Frames[0].Data != started || full.Frames[1].ID != "1" {
		t.Fatalf("full log %+v", full)
	}
	if again := f.stream(t, eventsReq(path, "acme", "", "")); !reflect.DeepEqual(again, full) {
		t.Fatalf("second read differs:\n%+v\n%+v", again, full)
	}
	if eventDoc(t, full.Frames[0].Data)["eventId"] == eventDoc(t, full.Frames[1].Data)["eventId"] {
		t.Fatal("two events share an eventId")
	}
}

func TestEventsTerminalPayloads(t *testing.T) {
	f := newFixture(t)
	failed := f.newRun(t, "acme")
	f.move(t, failed.ID, runs.StatusPending, runs.StatusFailed, "executor: gave up after 11 attempts: boom", t0.Add(time.Minute))
	blank := f.newRun(t, "acme")
	f.move(t, blank.ID, runs.StatusPending, runs.StatusFailed, "", t0.Add(time.Minute))
	cancelled := f.newRun(t, "acme")
	f.move(t, cancelled.ID, runs.StatusPending, runs.StatusCancelled, "", t0.Add(2*time.Second))
	cases := []struct {
		run     runs.Run
		typ     string
		payload map[string]any
	}{
		{failed, EventRunFailed, map[string]any{"durationMs": 60000.0,
			"error": map[string]any{"code": CodeRunFailed, "message": "executor: gave up after 11 attempts: boom"}}},
		{blank, EventRunFailed, map[string]any{"durationMs": 60000.0,
			"error": map[string]any{"code": CodeRunFailed, "message": "the run failed"}}},
		{cancelled, EventRunCancelled, map[string]any{"durationMs": 2000.0}},
	}
	for _, c := range cases {
		s := f.stream(t, eventsReq("/runs/"+runs.ProjectID(c.run.ID)+"/events", "acme", "", ""))
		if len(s.Frames) != 2 || s.Retry != "" || s.Frames[1].Event != c.typ {
			t.Fatalf("%s: %+v", c.typ, s)
		}
		d := eventDoc(t, s.Frames[1].Data)
		if d["type"] != c.typ || !reflect.DeepEqual(d["payload"], c.payload) {
			t.Fatalf("%s: %v", c.typ, d)
		}
	}
}

// TestCancelReasonIsRecorded: a cancel's reason is kept on the run and
// echoed by run.cancelled (runs.md §Cancel, run-event-payloads' runCancelled);
// a cancel without one records none (members named otherwise, "Reason"
// included, are not it); a reason over maxCancelReason
// characters is 400 validation_error naming it, and cancels nothing.
func TestCancelReasonIsRecorded(t *testing.T) {
	f := newFixture(t)
	why, none, long := f.newRun(t, "acme"), f.newRun(t, "acme"), f.newRun(t, "acme")
	if r, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(long.ID)+"/cancel", "acme", "k-cancel-reason-long-0000001",
		`{"reason":"`+strings.Repeat("é", maxCancelReason+1)+`"}`)); r.StatusCode != 400 || m["error"] != "validation_error" ||
		m["details"].(map[string]any)["field"] != "reason" {
		t.Fatalf("a reason too long: %d %s", r.StatusCode, r.Body)
	}
	for _, c := range []struct {
		run     runs.Run
		body    string
		payload map[string]any
	}{
		{why, `{"reason":"` + strings.Repeat("é", maxCancelReason) + `"}`, map[string]any{"reason": strings.Repeat("é", maxCancelReason)}},
		{none, `{"Reason":"` + strings.Repeat("x", maxCancelReason+1) + `","REASON":"not the reason"}`, map[string]any{}},
	} {
		if r, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(c.run.ID)+"/cancel", "acme", "k-cancel-reason-"+c.run.ID[len(c.run.ID)-12:], c.body)); r.StatusCode != 200 || m["status"] != "cancelled" {
			t.Fatalf("cancel: %d %s", r.StatusCode, r.Body)
		}
		s := f.stream(t, eventsReq("/runs/"+runs.ProjectID(c.run.ID)+"/events", "acme", "", ""))
		d := eventDoc(t, s.Frames[len(s.Frames)-1].Data)
		p, _ := d["payload"].(map[string]any)
		delete(p, "durationMs")
		if d["type"] != EventRunCancelled || !reflect.DeepEqual(p, c.payload) {
			t.Fatalf("run.cancelled: %v", d)
		}
	}
	if got, _ := f.runs.Get(context.Background(), long.ID); got.Status.Terminal() {
		t.Fatalf("the refused cancel ended the run: %s", got.Status)
	}
}

func TestEventsStreamModes(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	f.move(t, r.ID, runs.StatusPending, runs.StatusRunning, "", t0.Add(time.Second))
	f.move(t, r.ID, runs.StatusRunning, runs.StatusCompleted, "", t0.Add(2*time.Second))
	path := "/runs/" + runs.ProjectID(r.ID) + "/events"
	names := func(s sseStream) string {
		var out []string
		for _, fr := range s.Frames {
			out = append(out, fr.ID+" "+fr.Event)
		}
		return strings.Join(out, ", ")
	}
	cases := []struct{ query, lastID, want string }{
		{"", "", "0 run.started, 1 run.completed"},
		{"streamMode=updates", "", "0 run.started, 1 run.completed"},
		{"streamMode=debug", "", "0 run.started, 1 run.completed"},
		{"streamMode=updates,debug", "", "0 updates, 1 updates"},
		{"streamMode=debug,updates", "0", "1 debug"},
		{"streamMode=messages,debug", "", "0 debug, 1 debug"},
		{"streamMode=updates,updates", "", "0 run.started, 1 run.completed"},
		{"streamMode=updates%2Cdebug", "", "0 updates, 1 updates"},
		{"streamMode=messages", "", ""},
		{"streamMode=messages,messages", "", ""},
		{"bufferMs=0", "", "0 run.started, 1 run.completed"},
		{"bufferMs=250", "", "1 batch"},
		{"streamMode=debug&bufferMs=5000", "0", "1 batch"},
		{"bufferMs=250", "1", ""},
		{"streamMode=values", "", "1 state.snapshot"},
		{"streamMode=values", "1", "1 state.snapshot"},
		{"streamMode=values&bufferMs=100", "", "1 state.snapshot"},
	}
	for _, c := range cases {
		s := f.stream(t, eventsReq(path, "acme", c.query, c.lastID))
		if got := names(s); got != c.want {
			t.Errorf("?%s Last-Event-ID %q: frames %q, want %q", c.query, c.lastID, got, c.want)
		}
		for _, fr := range s.Frames {
			switch fr.Event {
			case "batch":
				var docs []json.RawMessage
				if err := json.Unmarshal([]byte(fr.Data), &docs); err != nil || len(docs) == 0 {
					t.Fatalf("batch %q: %v", fr.Data, err)
				}
				for i, doc := range docs {
					if d := eventDoc(t, string(doc)); i == len(docs)-1 && strconv.FormatFloat(d["sequence"].(float64), 'f', -1, 64) != fr.ID {
						t.Fatalf("batch id %s, last sequence %v", fr.ID, d["sequence"])
					}
				}
			case "state.snapshot":
				var snap map[string]any
				if err := json.Unmarshal([]byte(fr.Data), &snap); err != nil || snap["runId"] != r.ID || snap["status"] != "completed" ||
					snap["workflowId"] != "conformance-noop" || strings.Contains(fr.Data, "s3cr3t") {
					t.Fatalf("snapshot %q: %v", fr.Data, err)
				}
			default:
				eventDoc(t, fr.Data)
			}
		}
	}
	// values on a running run: the current status, and the retry hint.
	r2 := f.newRun(t, "acme")
	f.move(t, r2.ID, runs.StatusPending, runs.StatusRunning, "", t0.Add(time.Second))
	s := f.stream(t, eventsReq("/runs/"+runs.ProjectID(r2.ID)+"/events", "acme", "streamMode=values", ""))
	if len(s.Frames) != 1 || s.Frames[0].ID != "0" || !strings.Contains(s.Frames[0].Data, `"status":"running"`) || s.Retry == "" {
		t.Fatalf("values of a running run: %+v", s)
	}
	// The QueryStringParameters map alone (no raw query string) is read too.
	e := eventsReq(path, "acme", "", "")
	e.QueryStringParameters = map[string]string{"streamMode": "values"}
	if got := names(f.stream(t, e)); got != "1 state.snapshot" {
		t.Fatalf("from QueryStringParameters: %q", got)
	}
}

// TestEventsValidation: a streamMode outside the pattern is 400
// unsupported_stream_mode with details.supported, as the registry row
// requires; bad bufferMs / Last-Event-ID are 400 validation_error. The
// query is decided before the run is read: a run that does not exist
// still gets its 400, not a 404. Last-Event-ID is evaluated only for a run
// the caller reads (TestLastEventIDOnlyForARunTheCallerReads).
func TestEventsValidation(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	row := registryRow(t, CodeUnsupportedStreamMode)
	if row.HTTPStatus != 400 {
		t.Fatalf("registry: %s is %d", CodeUnsupportedStreamMode, row.HTTPStatus)
	}
	for _, id := range []string{r.ID, "acme/zzzzzzzzzzzzzzzzzzzz"} {
		path := "/runs/" + runs.ProjectID(id) + "/events"
		for _, q := range []string{"streamMode=", "streamMode=foo", "streamMode=Updates", "streamMode=values,updates",
			"streamMode=updates,values", "streamMode=updates,", "streamMode=,updates", "streamMode=updates%3Bdebug",
			"streamMode=updates%20", "streamMode=values,values", "streamMode=updates&streamMode=debug"} {
			resp, m := f.do(t, eventsReq(path, "acme", q, ""))
			if resp.StatusCode != 400 || m["error"] != CodeUnsupportedStreamMode || m["message"] == "" ||
				resp.Headers["Content-Type"] != "application/json" || resp.Headers["OpenWOP-Version"] == "" {
				t.Fatalf("?%s: %d %s", q, resp.StatusCode, resp.Body)
			}
			sup, _ := m["details"].(map[string]any)["supported"].([]any)
			if !reflect.DeepEqual(sup, []any{"values", "updates", "messages", "debug"}) {
				t.Fatalf("?%s: details %v", q, m["details"])
			}
			for _, s := range sup {
				if !contains(row.Supported, s.(string)) {
					t.Fatalf("supported %q is not in the registry's enum %v", s, row.Supported)
				}
			}
		}
		for _, c := range []struct{ query, lastID, field string }{
			{"bufferMs=-1", "", "bufferMs"}, {"bufferMs=5001", "", "bufferMs"}, {"bufferMs=x", "", "bufferMs"},
			{"bufferMs=", "", "bufferMs"}, {"bufferMs=1e3", "", "bufferMs"}, {"bufferMs=99999999999999999999", "", "bufferMs"},
			{"", "abc", "Last-Event-ID"}, {"", "-1", "Last-Event-ID"}, {"", "+1", "Last-Event-ID"}, {"", " 1", "Last-Event-ID"},
			{"", "1.0", "Last-Event-ID"}, {"", "1e3", "Last-Event-ID"},
			{"streamMode=%zz", "", ""},
		} {
			resp, m := f.do(t, eventsReq(path, "acme", c.query, c.lastID))
			if c.query == "" && id != r.ID {
				// No run to read: the header is not evaluated.
				if resp.StatusCode != 404 || m["error"] != "not_found" {
					t.Fatalf("unknown run, Last-Event-ID %q: %d %s", c.lastID, resp.StatusCode, resp.Body)
				}
				continue
			}
			if resp.StatusCode != 400 || m["error"] != "validation_error" {
				t.Fatalf("?%s Last-Event-ID %q: %d %s", c.query, c.lastID, resp.StatusCode, resp.Body)
			}
			if c.field != "" && m["details"].(map[string]any)["field"] != c.field {
				t.Fatalf("?%s Last-Event-ID %q: details %v", c.query, c.lastID, m["details"])
			}
		}
	}
	// The vendor code of run.failed follows the registry's vendorCodePattern
	// (its negative lookahead `(?!openwop\.)` checked by hand).
	reg := registry(t)
	pat := regexp.MustCompile(strings.Replace(reg.VendorCodePattern, `(?!openwop\.)`, "", 1))
	if !pat.MatchString(CodeRunFailed) || strings.HasPrefix(CodeRunFailed, "openwop.") {
		t.Fatalf("%s does not match vendorCodePattern %s", CodeRunFailed, reg.VendorCodePattern)
	}
}

type registryDoc struct {
	VendorCodePattern string `json:"vendorCodePattern"`
	Rows              []struct {
		Code       string `json:"code"`
		HTTPStatus int    `json:"httpStatus"`
		Details    *struct {
			Properties struct {
				Supported struct {
					Items struct {
						Enum []string `json:"enum"`
					} `json:"items"`
				} `json:"supported"`
			} `json:"properties"`
		} `json:"details"`
	} `json:"rows"`
}

func registry(t *testing.T) registryDoc {
	t.Helper()
	b, err := os.ReadFile(shared.Path(t, "openwop", "spec", "v2", "errors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reg registryDoc
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

type regRow struct {
	HTTPStatus int
	Supported  []string
}

func registryRow(t *testing.T, code string) regRow {
	t.Helper()
	for _, r := range registry(t).Rows {
		if r.Code == code {
			out := regRow{HTTPStatus: r.HTTPStatus}
			if r.Details != nil {
				out.Supported = r.Details.Properties.Supported.Items.Enum
			}
			return out
		}
	}
	t.Fatalf("%s is not in the registry", code)
	return regRow{}
}

// TestLastEventIDOnlyForARunTheCallerReads: Last-Event-ID is evaluated only
// after the caller is authorized to read the run (events.md §Resuming);
// for a run it cannot read (none by that id, another tenant's) the answer
// with a malformed header, or a well-formed one, is byte for byte the
// answer without it, on the stream and on its poll fallback (which does
// not read the header at all).
func TestLastEventIDOnlyForARunTheCallerReads(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	opaque := r.ID[len("acme/"):]
	for _, c := range []struct {
		name, path, tenant string
		status             int
		code               string
	}{
		{"no such run", "/runs/acme%2Fzzzzzzzzzzzzzzzzzzzz/events", "acme", 404, "not_found"},
		{"no such run, projected", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz/events", "acme", 404, "not_found"},
		{"another tenant's run", "/runs/acme%2F" + opaque + "/events", "globex", 403, "id_tenant_mismatch"},
		{"no such run, poll", "/runs/acme%2Fzzzzzzzzzzzzzzzzzzzz/events/poll", "acme", 404, "not_found"},
		{"another tenant's run, poll", "/runs/acme%2F" + opaque + "/events/poll", "globex", 403, "id_tenant_mismatch"},
	} {
		without, _ := f.do(t, eventsReq(c.path, c.tenant, "", ""))
		if without.StatusCode != c.status {
			t.Fatalf("%s without the header: %d %s", c.name, without.StatusCode, without.Body)
		}
		for _, id := range []string{"abc", "-1", "1.0", "0", "7"} {
			resp, m := f.do(t, eventsReq(c.path, c.tenant, "", id))
			if resp.StatusCode != c.status || m["error"] != c.code || resp.Body != without.Body {
				t.Fatalf("%s, Last-Event-ID %q: %d %s, want %d %s", c.name, id, resp.StatusCode, resp.Body, without.StatusCode, without.Body)
			}
		}
	}
	// The caller's own run: the header is evaluated.
	resp, m := f.do(t, eventsReq("/runs/acme%2F"+opaque+"/events", "acme", "", "abc"))
	if resp.StatusCode != 400 || m["error"] != "validation_error" || m["details"].(map[string]any)["field"] != "Last-Event-ID" {
		t.Fatalf("own run, Last-Event-ID abc: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestEventsTenancy: the same auth and tenant rules as GET /runs/{runId},
// in every encoding of the runId; another tenant never sees a byte of the
// run, whatever streamMode it asks for.
func TestEventsTenancy(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	f.move(t, r.ID, runs.StatusPending, runs.StatusFailed, "boom: acme-private", t0.Add(time.Second))
	opaque := r.ID[len("acme/"):]
	encs := []string{runs.ProjectID(r.ID), "acme%2F" + opaque, "acme%2f" + opaque, "acme/" + opaque, "acme~2f" + opaque}
	for _, enc := range encs {
		if s := f.stream(t, eventsReq("/runs/"+enc+"/events", "acme", "", "")); len(s.Frames) != 2 {
			t.Fatalf("%s: %+v", enc, s)
		}
		for _, q := range []string{"", "streamMode=values", "streamMode=debug&bufferMs=10", "streamMode=bogus"} {
			resp, m := f.do(t, eventsReq("/runs/"+enc+"/events", "globex", q, ""))
			if resp.StatusCode != 403 || m["error"] != "id_tenant_mismatch" || strings.Contains(resp.Body, opaque) ||
				strings.Contains(resp.Body, "acme-private") || strings.Contains(resp.Body, "data:") {
				t.Fatalf("globex %s?%s: %d %s", enc, q, resp.StatusCode, resp.Body)
			}
		}
		if resp, m := f.do(t, eventsReq("/runs/"+enc+"/events", "", "", "")); resp.StatusCode != 401 || m["error"] != "unauthenticated" {
			t.Fatalf("no credential %s: %d %s", enc, resp.StatusCode, resp.Body)
		}
	}
	// A well-formed id of the caller's tenant that names no run: 404.
	if resp, m := f.do(t, eventsReq("/runs/globex~2F"+opaque+"/events", "globex", "", "")); resp.StatusCode != 404 || m["error"] != "not_found" {
		t.Fatalf("unknown run: %d %s", resp.StatusCode, resp.Body)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		resp, g := f.do(t, ev(m, "/runs/"+runs.ProjectID(r.ID)+"/events", "acme", "", ""))
		if resp.StatusCode != 405 || g["error"] != CodeMethodNotAllowed || resp.Headers["Allow"] != "GET, HEAD" {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, resp.Body)
		}
	}
	for _, p := range []string{"/runs/acme/events", "/runs/acme~2Fshort/events", "/runs/acme~2G" + opaque + "/events"} {
		if resp, g := f.do(t, eventsReq(p, "acme", "", "")); resp.StatusCode != 400 || g["error"] != "validation_error" {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, resp.Body)
		}
	}
	// The long-poll fallback is served (pollRunEvents), tenant-bound like the stream.
	if resp, g := f.do(t, eventsReq("/runs/"+runs.ProjectID(r.ID)+"/events/poll", "acme", "", "")); resp.StatusCode != 200 || g["runId"] != r.ID {
		t.Fatalf("events/poll: %d %s", resp.StatusCode, resp.Body)
	}
}

// TestEventsRacingTransitions reads the stream while a cancel races the
// executor's pending -> running -> completed: whichever wins, every reader
// sees event 0 byte-identical and, once an event 1 exists, the same one
// the final log has — a sequence never names two different events.
func TestEventsRacingTransitions(t *testing.T) {
	f := newFixture(t)
	for round := 0; round < 20; round++ {
		r := f.newRun(t, "acme")
		path := "/runs/" + runs.ProjectID(r.ID) + "/events"
		var wg sync.WaitGroup
		seen := make(chan sseStream, 64)
		wg.Add(2)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if _, err := f.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", t0.Add(time.Second)); err == nil {
				_, _ = f.runs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", t0.Add(2*time.Second))
			}
		}()
		go func() {
			defer wg.Done()
			_, _ = f.runs.Transition(context.Background(), r.ID, []runs.Status{runs.StatusPending, runs.StatusRunning}, runs.StatusCancelled, "", t0.Add(3*time.Second))
		}()
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 8; j++ {
					resp, err := f.h.Handle(context.Background(), eventsReq(path, "acme", "", ""))
					if err != nil || resp.StatusCode != 200 {
						t.Errorf("%d %v", resp.StatusCode, err)
						return
					}
					if j%4 == 0 {
						seen <- parseSSE(t, resp.Body)
					}
				}
			}()
		}
		wg.Wait()
		close(seen)
		final := f.stream(t, eventsReq(path, "acme", "", ""))
		if len(final.Frames) != 2 {
			t.Fatalf("final log %+v", final)
		}
		for s := range seen {
			if len(s.Frames) == 0 || s.Frames[0] != final.Frames[0] {
				t.Fatalf("event 0 differs: %+v vs %+v", s.Frames, final.Frames[0])
			}
			if len(s.Frames) == 2 && s.Frames[1] != final.Frames[1] {
				t.Fatalf("sequence 1 named two events: %+v and %+v", s.Frames[1], final.Frames[1])
			}
			if len(s.Frames) == 2 && s.Retry != "" || len(s.Frames) == 1 && s.Retry == "" {
				t.Fatalf("retry hint %q with %d frames", s.Retry, len(s.Frames))
			}
		}
	}
}

// TestEventsUpdatesModeCarriesTheUpdatesTier: updates (the default)
// carries the updates tier of events.md §Stream modes (run transitions and
// terminal node transitions here), never node.started, cap.breached or
// replay.diverged, which only debug carries (every event of the log); in
// a combination each frame is named by the first requested mode that
// admits it, and Last-Event-ID resumes after any sequence, also one
// updates did not carry.
func TestEventsUpdatesModeCarriesTheUpdatesTier(t *testing.T) {
	f := newFixture(t)
	r := sourceRun(t, f, "acme", runs.StatusCompleted)
	path := "/runs/" + runs.ProjectID(r.ID) + "/events"
	names := func(s sseStream) string {
		var out []string
		for _, fr := range s.Frames {
			out = append(out, fr.ID+" "+fr.Event)
		}
		return strings.Join(out, ", ")
	}
	const updates = "0 run.started, 2 node.completed, 4 node.completed, 6 node.completed, 8 node.completed, 9 run.completed"
	for _, c := range []struct{ query, lastID, want string }{
		{"", "", updates},
		{"streamMode=updates", "", updates},
		{"streamMode=debug", "", "0 run.started, 1 node.started, 2 node.completed, 3 node.started, 4 node.completed, " +
			"5 node.started, 6 node.completed, 7 node.started, 8 node.completed, 9 run.completed"},
		{"streamMode=updates,debug", "6", "7 debug, 8 updates, 9 updates"},
		{"streamMode=debug,updates", "6", "7 debug, 8 debug, 9 debug"},
		{"", "7", "8 node.completed, 9 run.completed"},
		{"bufferMs=100", "4", "9 batch"},
	} {
		s := f.stream(t, eventsReq(path, "acme", c.query, c.lastID))
		if got := names(s); got != c.want {
			t.Errorf("?%s Last-Event-ID %q: frames %q, want %q", c.query, c.lastID, got, c.want)
		}
		for _, fr := range s.Frames {
			if fr.Event == "batch" {
				var docs []struct{ Type string }
				if err := json.Unmarshal([]byte(fr.Data), &docs); err != nil {
					t.Fatal(err)
				}
				var types []string
				for _, d := range docs {
					types = append(types, d.Type)
				}
				if got := strings.Join(types, ","); got != "node.completed,node.completed,run.completed" {
					t.Errorf("?%s: batch of %s", c.query, got)
				}
			}
		}
	}
}
