package devstack_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// surface drives one `idemkit dev` stack's run surface and checks every
// answer it reads against the closed v2 schemas.
type surface struct {
	t                     *testing.T
	base, key             string
	event, snapshot, poll *jsonschema.Schema
	fork                  *jsonschema.Schema
}

const surfaceOtherKey = "idk_surface_other_0123456789"

// startStackOn starts the stack as startStack does, on the emulator kind.
func startStackOn(t *testing.T, kind string, o devstack.Options) *devstack.Stack {
	t.Helper()
	o.Endpoint = dynamotest.Start(t, kind).Endpoint
	o.Addr = "127.0.0.1:0"
	o.TablePrefix = fmt.Sprintf("surface%d-", time.Now().UnixNano())
	s, err := devstack.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// surfaceEngines are the emulators the run-surface tests run on.
var surfaceEngines = []string{dynamotest.Moto, dynamotest.Dynalite, dynamotest.DynamoDBLocal}

func newSurface(t *testing.T, kind string) *surface {
	t.Helper()
	return newSurfaceWith(t, kind, nil)
}

// newSurfaceWith is newSurface with the stack's settings.
func newSurfaceWith(t *testing.T, kind string, settings map[string]string) *surface {
	t.Helper()
	key := "idk_surface_test_0123456789"
	s := startStackOn(t, kind, devstack.Options{APIKeys: []string{key + "=acme", surfaceOtherKey + "=umbrella"}, Settings: settings})
	o := wireschema.Load(t)
	su := &surface{t: t, base: s.URL(), key: key}
	var err error
	if su.event, err = o.Schema("run-event.schema.json"); err != nil {
		t.Fatal(err)
	}
	if su.snapshot, _, err = o.Response("GET", "/runs/{runId}", 200); err != nil {
		t.Fatal(err)
	}
	if su.poll, _, err = o.Response("GET", "/runs/{runId}/events/poll", 200); err != nil {
		t.Fatal(err)
	}
	if su.fork, _, err = o.Response("POST", "/runs/{runId}:fork", 201); err != nil {
		t.Fatal(err)
	}
	return su
}

func pathID(id string) string { return url.PathEscape(id) }

func (su *surface) do(method, path, body string, hdr ...string) (*http.Response, map[string]any, string) {
	su.t.Helper()
	req, err := http.NewRequest(method, su.base+path, strings.NewReader(body))
	if err != nil {
		su.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", testutil.Bearer(su.key))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		su.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp, m, string(b)
}

type pollAnswer struct {
	status string
	types  []string
	last   int64
	raw    []json.RawMessage
}

// pollAll reads the run's whole log through the poll (afterSequence
// omitted, timeout 1) and checks it: the answer and every event valid,
// sequences 0..n with no gap, lastSequence the last of them, run.started
// first, exactly one terminal run event and nothing after it when the run
// ended (none while it is live), every run.resumed after a run.paused.
func (su *surface) pollAll(id string) pollAnswer {
	su.t.Helper()
	resp, _, body := su.do("GET", "/runs/"+pathID(id)+"/events/poll?timeout=1", "")
	if resp.StatusCode != 200 {
		su.t.Fatalf("poll: %d %s", resp.StatusCode, body)
	}
	if err := wireschema.Validate(su.poll, []byte(body)); err != nil {
		su.t.Fatalf("poll answer: %v\n%s", err, body)
	}
	var p struct {
		Events       []json.RawMessage `json:"events"`
		LastSequence int64             `json:"lastSequence"`
		Status       string            `json:"status"`
		IsTerminal   bool              `json:"isTerminal"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		su.t.Fatal(err)
	}
	a := pollAnswer{status: p.Status, last: p.LastSequence, raw: p.Events}
	terminal := map[string]bool{"run.completed": true, "run.failed": true, "run.cancelled": true}
	paused, ended := false, -1
	for i, raw := range p.Events {
		if err := wireschema.Validate(su.event, raw); err != nil {
			su.t.Fatalf("event %d: %v\n%s", i, err, raw)
		}
		var e struct {
			RunID    string `json:"runId"`
			Type     string `json:"type"`
			Sequence int64  `json:"sequence"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Sequence != int64(i) || e.RunID != id {
			su.t.Fatalf("event %d has sequence %d, run %s: %s", i, e.Sequence, e.RunID, body)
		}
		if i == 0 && e.Type != "run.started" {
			su.t.Fatalf("the log starts with %s", e.Type)
		}
		if ended >= 0 {
			su.t.Fatalf("%s at %d after the terminal event at %d: %s", e.Type, i, ended, body)
		}
		switch {
		case terminal[e.Type]:
			ended = i
		case e.Type == "run.paused":
			if paused {
				su.t.Fatalf("run.paused twice without a run.resumed between: %s", body)
			}
			paused = true
		case e.Type == "run.resumed":
			if !paused {
				su.t.Fatalf("run.resumed with no run.paused before it: %s", body)
			}
			paused = false
		}
		a.types = append(a.types, e.Type)
	}
	if n := int64(len(p.Events)) - 1; p.LastSequence != n {
		su.t.Fatalf("lastSequence %d, the log's last is %d", p.LastSequence, n)
	}
	if p.IsTerminal != (ended >= 0) || p.IsTerminal != terminal["run."+p.Status] {
		su.t.Fatalf("status %s isTerminal %v, terminal event at %d: %s", p.Status, p.IsTerminal, ended, body)
	}
	return a
}

// get reads the snapshot (valid against getRun's 200) and its ETag, and
// checks that If-None-Match with that ETag is a 304 with no body.
func (su *surface) get(id string) (map[string]any, string) {
	su.t.Helper()
	resp, m, body := su.do("GET", "/runs/"+pathID(id), "")
	if resp.StatusCode != 200 {
		su.t.Fatalf("getRun: %d %s", resp.StatusCode, body)
	}
	if err := wireschema.Validate(su.snapshot, []byte(body)); err != nil {
		su.t.Fatalf("snapshot: %v\n%s", err, body)
	}
	etag := resp.Header.Get("ETag")
	if etag == "" {
		su.t.Fatalf("getRun carries no ETag")
	}
	r304, _, b304 := su.do("GET", "/runs/"+pathID(id), "", "If-None-Match", etag)
	if r304.StatusCode != 304 || b304 != "" {
		// The run may have moved between the two reads: read again.
		if again, _ := su.get2(id); again == etag {
			su.t.Fatalf("If-None-Match %s: %d %q, want 304 with no body", etag, r304.StatusCode, b304)
		}
	}
	return m, etag
}

func (su *surface) get2(id string) (string, error) {
	resp, _, _ := su.do("GET", "/runs/"+pathID(id), "")
	return resp.Header.Get("ETag"), nil
}

// await polls the log until cond holds (the run moves on its own).
func (su *surface) await(id, what string, cond func(pollAnswer) bool) pollAnswer {
	su.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		a := su.pollAll(id)
		if cond(a) {
			return a
		}
		if time.Now().After(deadline) {
			su.t.Fatalf("%s: never; log %v status %s", what, a.types, a.status)
		}
	}
}

func count(types []string, typ string) int {
	n := 0
	for _, x := range types {
		if x == typ {
			n++
		}
	}
	return n
}

// sse reads the stream's frames after lastEventID ("" for none) until it
// closes (a terminal run's stream closes after its terminal event), each
// frame's data valid against the event schema.
func (su *surface) sse(id, query, lastEventID string) (ids []int64, types []string) {
	su.t.Helper()
	ids, types, err := su.readSSE(id, query, lastEventID)
	if err != nil {
		su.t.Fatal(err)
	}
	return ids, types
}

// readSSE is sse for a goroutine: it reports what is wrong as an error. A
// values stream's frames are snapshots, checked against getRun's schema;
// types then holds each one's status.
func (su *surface) readSSE(id, query, lastEventID string) (ids []int64, types []string, err error) {
	req, _ := http.NewRequest("GET", su.base+"/runs/"+pathID(id)+"/events"+query, nil)
	req.Header.Set("Authorization", testutil.Bearer(su.key))
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return nil, nil, fmt.Errorf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			n, err := strconv.ParseInt(line[4:], 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("frame id %q", line)
			}
			ids = append(ids, n)
		case strings.HasPrefix(line, "data: ") && strings.Contains(query, "values"):
			// A state.snapshot: the run snapshot; types gets its status.
			if err := wireschema.Validate(su.snapshot, []byte(line[6:])); err != nil {
				return nil, nil, fmt.Errorf("snapshot frame: %v\n%s", err, line)
			}
			var snap struct{ Status string }
			_ = json.Unmarshal([]byte(line[6:]), &snap)
			types = append(types, snap.Status)
		case strings.HasPrefix(line, "data: "):
			if err := wireschema.Validate(su.event, []byte(line[6:])); err != nil {
				return nil, nil, fmt.Errorf("frame data: %v\n%s", err, line)
			}
			var e struct{ Type string }
			_ = json.Unmarshal([]byte(line[6:]), &e)
			types = append(types, e.Type)
		}
	}
	return ids, types, sc.Err()
}

// TestDevRunSurfaceAcrossPauseResumeCancelAndFork drives a real run of the
// node-graph fixture through `idemkit dev` (on moto and dynalite) (an immediate pause inside its
// wait, a resume, a second pause letting the wait drain, a cancel of the
// paused run, its held run.paused then shown before run.cancelled; then forks
// of the cancelled run at every point of its log before its end, the
// points right after run.paused and run.resumed among them, each
// cancelled in turn) and checks, after every transition, what the run
// surface serves: every event and answer valid against the closed
// schemas, sequences 0..n never renumbered (a later read's log begins
// with the earlier one's, byte for byte), one terminal event last,
// run.paused and run.resumed paired, the snapshot's status the poll's, an
// ETag that changes on every observable transition with a 304 for
// If-None-Match, a debug stream held open from the start carrying each
// event once in order and closing by itself after run.cancelled (and a
// values stream's snapshots, ids rising, the last the cancelled run's), the
// Last-Event-ID and afterSequence cursors at and past the end, another tenant's read refused, and a fork's prefix the
// source's (under the fork's own runId and eventIds) with its inherited
// run.paused folded as a no-op: the fork executes, never paused.
func TestDevRunSurfaceAcrossPauseResumeCancelAndFork(t *testing.T) {
	// Moto (its stream drives the executor) and dynalite (no stream: dev's
	// own feed does); DynamoDB Local drives it as moto does. The two run
	// at once: each one's time is mostly waiting on its run.
	dynamotest.ForKindsConcurrently(t, []string{dynamotest.Moto, dynamotest.Dynalite}, testRunSurfaceAcrossPauseResumeCancelAndFork)
}

func testRunSurfaceAcrossPauseResumeCancelAndFork(t *testing.T, kind string) {
	su := newSurface(t, kind)
	resp, m, body := su.do("POST", "/runs", `{"workflowId":"conformance-replay-ordinal-loop","inputs":{"delayMs":60000}}`)
	if resp.StatusCode != 201 {
		t.Fatalf("createRun: %d %s", resp.StatusCode, body)
	}
	id := m["runId"].(string)
	// A debug stream held open from the start: through every transition
	// below it carries each event once, in order, and closes by itself
	// after run.cancelled.
	type streamed struct {
		ids   []int64
		types []string
		err   error
	}
	held, values := make(chan streamed, 1), make(chan streamed, 1)
	go func() {
		ids, types, err := su.readSSE(id, "?streamMode=debug", "")
		held <- streamed{ids, types, err}
	}()
	go func() {
		ids, types, err := su.readSSE(id, "?streamMode=values", "")
		values <- streamed{ids, types, err}
	}()
	etags := map[string]string{}
	seen := func(state string) {
		t.Helper()
		snap, etag := su.get(id)
		a := su.pollAll(id)
		if snap["status"] != a.status {
			t.Fatalf("%s: snapshot status %v, poll status %s", state, snap["status"], a.status)
		}
		for prev, e := range etags {
			if e == etag {
				t.Fatalf("%s: ETag %s is the one served at %s", state, etag, prev)
			}
		}
		etags[state] = etag
	}
	// The first node completes, then the wait holds.
	a := su.await(id, "the wait starts", func(a pollAnswer) bool { return count(a.types, "node.completed") >= 1 && len(a.types) >= 4 })
	prefix := a.raw
	seen("in the wait")
	stable := func(what string) {
		t.Helper()
		b := su.pollAll(id)
		for i := range prefix {
			if i >= len(b.raw) || string(b.raw[i]) != string(prefix[i]) {
				t.Fatalf("%s: event %d changed or vanished: was %s, now %v", what, i, prefix[i], b.types)
			}
		}
		prefix = b.raw
	}
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":pause", `{"drainPolicy":"immediate","reason":"one"}`); r.StatusCode != 202 {
		t.Fatalf("pause: %d %s", r.StatusCode, body)
	}
	a = su.await(id, "run.paused is recorded", func(a pollAnswer) bool { return count(a.types, "run.paused") == 1 })
	stable("paused")
	seen("paused")
	pausedAt := a.last
	// Cursors at the end of a live run's log and past it: 200, no events.
	for _, c := range []string{strconv.FormatInt(a.last, 10), "99999999999999999999"} {
		r, m, body := su.do("GET", "/runs/"+pathID(id)+"/events/poll?timeout=1&afterSequence="+c, "")
		if evs, _ := m["events"].([]any); r.StatusCode != 200 || len(evs) != 0 || m["lastSequence"] != float64(a.last) {
			t.Fatalf("poll after %s: %d %s", c, r.StatusCode, body)
		}
	}
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":pause", `{}`); r.StatusCode != 409 || !strings.Contains(body, `"run_state_conflict"`) {
		t.Fatalf("a second pause: %d %s", r.StatusCode, body)
	}
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":resume", `{"reason":"go"}`); r.StatusCode != 202 {
		t.Fatalf("resume: %d %s", r.StatusCode, body)
	}
	su.await(id, "run.resumed is recorded", func(a pollAnswer) bool { return count(a.types, "run.resumed") == 1 })
	stable("resumed")
	seen("resumed")
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":resume", `{}`); r.StatusCode != 409 || !strings.Contains(body, `"run_state_conflict"`) {
		t.Fatalf("a resume of a running run: %d %s", r.StatusCode, body)
	}
	// The resumed wait restarts; pause it again, letting the wait drain
	// (its run.paused is held until the node ends), and cancel it paused.
	su.await(id, "the wait restarts", func(a pollAnswer) bool { return a.types[len(a.types)-1] == "node.started" && a.last > pausedAt+1 })
	stable("restarted")
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+":pause", `{"reason":"drain"}`); r.StatusCode != 202 {
		t.Fatalf("second pause: %d %s", r.StatusCode, body)
	}
	su.await(id, "paused again", func(a pollAnswer) bool { return a.status == "paused" })
	stable("paused again")
	seen("paused again")
	r, m, body := su.do("POST", "/runs/"+pathID(id)+"/cancel", `{"reason":"stop"}`)
	if r.StatusCode != 200 || (m["status"] != "cancelled" && m["status"] != "cancelling") {
		t.Fatalf("cancel: %d %s", r.StatusCode, body)
	}
	a = su.await(id, "run.cancelled", func(a pollAnswer) bool { return a.status == "cancelled" })
	stable("cancelled")
	seen("cancelled")
	if n := len(a.types); a.types[n-1] != "run.cancelled" || a.types[n-2] != "run.paused" || count(a.types, "run.paused") != 2 {
		t.Fatalf("the log of the run cancelled while paused: %v", a.types)
	}
	if r, _, body := su.do("POST", "/runs/"+pathID(id)+"/cancel", `{}`); r.StatusCode != 409 || !strings.Contains(body, `"run_terminal"`) {
		t.Fatalf("a second cancel: %d %s", r.StatusCode, body)
	}
	for _, op := range []string{":pause", ":resume"} {
		if r, _, body := su.do("POST", "/runs/"+pathID(id)+op, `{}`); r.StatusCode != 409 || !strings.Contains(body, `"run_terminal"`) {
			t.Fatalf("%s of a cancelled run: %d %s", op, r.StatusCode, body)
		}
	}
	// Streams of the ended run: the whole log in debug mode; after its
	// last event, no frame; after an event in the middle, the rest.
	select {
	case h := <-held:
		if h.err != nil {
			t.Fatalf("the held stream: %v", h.err)
		}
		if strings.Join(h.types, ",") != strings.Join(a.types, ",") || len(h.ids) != len(a.types) || h.ids[len(h.ids)-1] != a.last {
			t.Fatalf("the stream held through the run: ids %v types %v; the log %v", h.ids, h.types, a.types)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream held open never closed after run.cancelled")
	}
	// The values stream: snapshots with rising ids, the last one the
	// cancelled run's at its last sequence.
	select {
	case v := <-values:
		if v.err != nil {
			t.Fatalf("the values stream: %v", v.err)
		}
		for i := 1; i < len(v.ids); i++ {
			if v.ids[i] <= v.ids[i-1] {
				t.Fatalf("values stream ids %v", v.ids)
			}
		}
		if n := len(v.ids); n == 0 || v.ids[n-1] != a.last || v.types[n-1] != "cancelled" {
			t.Fatalf("values stream: ids %v statuses %v; the log ends at %d", v.ids, v.types, a.last)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the values stream never closed after run.cancelled")
	}
	ids, types := su.sse(id, "?streamMode=debug", "")
	if len(ids) != len(a.types) || strings.Join(types, ",") != strings.Join(a.types, ",") {
		t.Fatalf("debug stream %v %v, the log %v", ids, types, a.types)
	}
	if ids, _ := su.sse(id, "?streamMode=debug", strconv.FormatInt(a.last, 10)); len(ids) != 0 {
		t.Fatalf("Last-Event-ID at the end of an ended run's log: frames %v", ids)
	}
	if ids, _ := su.sse(id, "?streamMode=debug", strconv.FormatInt(pausedAt, 10)); len(ids) == 0 || ids[0] != pausedAt+1 || ids[len(ids)-1] != a.last {
		t.Fatalf("Last-Event-ID %d: frames %v, want %d..%d", pausedAt, ids, pausedAt+1, a.last)
	}
	// This run's cursor on another tenant's credential: refused, nothing
	// of the run disclosed.
	req, _ := http.NewRequest("GET", su.base+"/runs/"+pathID(id)+"/events/poll?afterSequence=0", nil)
	req.Header.Set("Authorization", testutil.Bearer(surfaceOtherKey))
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 403 {
		t.Fatalf("another tenant's poll: %v %v", r, err)
	} else {
		r.Body.Close()
	}
	ended := map[string][]json.RawMessage{id: a.raw}
	// Forks at every point of the log before its end, in both modes.
	for from := int64(1); from < a.last; from++ {
		for _, mode := range []string{"replay", "branch"} {
			r, m, body := su.do("POST", "/runs/"+pathID(id)+":fork", fmt.Sprintf(`{"mode":%q,"fromSeq":%d}`, mode, from))
			if r.StatusCode != 201 {
				t.Fatalf("fork %s at %d: %d %s", mode, from, r.StatusCode, body)
			}
			if err := wireschema.Validate(su.fork, []byte(body)); err != nil {
				t.Fatalf("fork answer: %v\n%s", err, body)
			}
			child := m["runId"].(string)
			// The fork moves past its inherited prefix: an inherited
			// run.paused leaves it running, not paused.
			fa := su.await(child, fmt.Sprintf("the %s fork at %d executes", mode, from), func(x pollAnswer) bool {
				return x.last >= from && x.status == "running"
			})
			for i := int64(0); i < from; i++ {
				var src, got map[string]any
				_ = json.Unmarshal(a.raw[i], &src)
				_ = json.Unmarshal(fa.raw[i], &got)
				// The fork's own runId and eventId (RED_TEAM 539): an
				// eventId is never the source's.
				if got["eventId"] == src["eventId"] {
					t.Fatalf("%s fork at %d: event %d has the source's eventId %v", mode, from, i, src["eventId"])
				}
				for _, k := range []string{"runId", "eventId"} {
					delete(src, k)
					delete(got, k)
				}
				sb, _ := json.Marshal(src)
				gb, _ := json.Marshal(got)
				if string(sb) != string(gb) {
					t.Fatalf("%s fork at %d: event %d is %s, the source's %s", mode, from, i, gb, sb)
				}
			}
			if snap, _ := su.get(child); snap["status"] != "running" {
				t.Fatalf("%s fork at %d: status %v, log %v", mode, from, snap["status"], fa.types)
			}
			if r, _, body := su.do("POST", "/runs/"+pathID(child)+"/cancel", `{}`); r.StatusCode != 200 {
				t.Fatalf("cancel of the %s fork at %d: %d %s", mode, from, r.StatusCode, body)
			}
			fa = su.await(child, "the fork is cancelled", func(x pollAnswer) bool { return x.status == "cancelled" })
			if fa.types[len(fa.types)-1] != "run.cancelled" {
				t.Fatalf("%s fork at %d: log %v", mode, from, fa.types)
			}
			ended[child] = fa.raw
		}
	}
	// An ended run's log never changes, also once the executions it
	// stopped (each notices at its next claim renewal) have returned.
	for run, log := range ended {
		now := su.pollAll(run).raw
		if len(now) != len(log) {
			t.Fatalf("run %s: %d events after it ended, %d now", run, len(log), len(now))
		}
		for i := range log {
			if string(now[i]) != string(log[i]) {
				t.Fatalf("run %s: event %d was %s, now %s", run, i, log[i], now[i])
			}
		}
	}
}

// TestDevRunSurfaceOfWebhookRuns drives real runs that send through
// `idemkit dev` (on moto, dynalite and DynamoDB Local) to a local
// receiver: a webhook run answered 503 with Retry-After twice and then 200
// (parked between tries, it completes), one answered 400 (it fails), one
// answered 503 with a Retry-After of ten minutes (parked: paused, resumed,
// paused again and cancelled while parked, nothing sent before the
// Retry-After), and a node-graph run whose side-effecting node is answered
// 400 (it fails; its retry is a run of its own that sends once; a replay
// fork fails with the source's error and sends nothing; a branch sends
// again). Every read of each (snapshot, poll, stream) is checked as in
// TestDevRunSurfaceAcrossPauseResumeCancelAndFork: valid against the
// closed schemas, sequences 0..n, one terminal event last, run.paused and
// run.resumed paired; a failed run's snapshot error is its run.failed
// event's error. Runs ended by a breached runTimeoutMs or
// maxLoopIterations fail with run_timeout or loop_limit_exceeded, after a
// cap.breached of the cap's kind.
//
// The engines run at once, each a stack and a receiver of its own: much of
// each one's time is its runs' Retry-After waits.
func TestDevRunSurfaceOfWebhookRuns(t *testing.T) {
	dynamotest.ForKindsConcurrently(t, surfaceEngines, testRunSurfaceOfWebhookRuns)
}

func testRunSurfaceOfWebhookRuns(t *testing.T, kind string) {
	var mu sync.Mutex
	tries := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries[r.URL.Path]++
		n := tries[r.URL.Path]
		mu.Unlock()
		switch {
		case r.URL.Path == "/flaky" && n <= 2:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
		case r.URL.Path == "/flaky" || r.URL.Path == "/ok":
			w.WriteHeader(200)
		case r.URL.Path == "/bad" || r.URL.Path == "/bad-node":
			w.WriteHeader(400)
		default:
			w.Header().Set("Retry-After", "600")
			w.WriteHeader(503)
		}
	}))
	t.Cleanup(recv.Close)
	key := "idk_surface_hook_0123456789"
	s := startStackOn(t, kind, devstack.Options{APIKeys: []string{key + "=acme"}, Settings: map[string]string{"WEBHOOK_ALLOW_LOOPBACK": "true"}})
	o := wireschema.Load(t)
	su := &surface{t: t, base: s.URL(), key: key}
	su.event, _ = o.Schema("run-event.schema.json")
	su.snapshot, _, _ = o.Response("GET", "/runs/{runId}", 200)
	su.poll, _, _ = o.Response("GET", "/runs/{runId}/events/poll", 200)
	create := func(path string) string {
		t.Helper()
		r, m, body := su.do("POST", "/runs", fmt.Sprintf(`{"workflowId":"webhook","inputs":{"url":%q,"payload":{"a":1}}}`, recv.URL+path))
		if r.StatusCode != 201 {
			t.Fatalf("createRun: %d %s", r.StatusCode, body)
		}
		return m["runId"].(string)
	}
	ended := func(x pollAnswer) bool {
		return x.status == "completed" || x.status == "failed" || x.status == "cancelled"
	}

	flaky := create("/flaky")
	a := su.await(flaky, "the flaky delivery completes", ended)
	if a.status != "completed" {
		t.Fatalf("flaky: %s, log %v", a.status, a.types)
	}
	su.get(flaky)
	ids, types := su.sse(flaky, "?streamMode=debug", "")
	if len(ids) != len(a.types) || strings.Join(types, ",") != strings.Join(a.types, ",") {
		t.Fatalf("debug stream %v, the log %v", types, a.types)
	}

	bad := create("/bad")
	a = su.await(bad, "the refused delivery fails", ended)
	snap, _ := su.get(bad)
	if a.status != "failed" || a.types[len(a.types)-1] != "run.failed" {
		t.Fatalf("bad: %s, log %v", a.status, a.types)
	}
	var last struct {
		Payload struct {
			Error map[string]any `json:"error"`
		} `json:"payload"`
	}
	_ = json.Unmarshal(a.raw[len(a.raw)-1], &last)
	se, _ := json.Marshal(snap["error"])
	ee, _ := json.Marshal(last.Payload.Error)
	if string(se) != string(ee) {
		t.Fatalf("the snapshot's error %s, run.failed's %s", se, ee)
	}

	parked := create("/parked")
	su.await(parked, "the run parks", func(x pollAnswer) bool {
		snap, _ := su.get(parked)
		ext, _ := snap["extensions"].(map[string]any)
		run, _ := ext["idemkit.run"].(map[string]any)
		return run["retry"] != nil || ended(x)
	})
	if snap, _ := su.get(parked); snap["status"] != "running" {
		t.Fatalf("the parked run: %v", snap)
	}
	if r, _, body := su.do("POST", "/runs/"+pathID(parked)+":pause", `{}`); r.StatusCode != 202 {
		t.Fatalf("pause of a parked run: %d %s", r.StatusCode, body)
	}
	a = su.await(parked, "paused", func(x pollAnswer) bool { return x.status == "paused" })
	if r, _, body := su.do("POST", "/runs/"+pathID(parked)+":resume", `{}`); r.StatusCode != 202 {
		t.Fatalf("resume: %d %s (log %v)", r.StatusCode, body, a.types)
	}
	su.await(parked, "resumed", func(x pollAnswer) bool { return x.status == "running" && count(x.types, "run.resumed") == 1 })
	if r, _, body := su.do("POST", "/runs/"+pathID(parked)+":pause", `{"drainPolicy":"immediate"}`); r.StatusCode != 202 {
		t.Fatalf("second pause: %d %s", r.StatusCode, body)
	}
	su.await(parked, "paused again", func(x pollAnswer) bool { return x.status == "paused" && count(x.types, "run.paused") == 2 })
	if r, _, body := su.do("POST", "/runs/"+pathID(parked)+"/cancel", `{}`); r.StatusCode != 200 {
		t.Fatalf("cancel: %d %s", r.StatusCode, body)
	}
	a = su.await(parked, "cancelled", ended)
	su.get(parked)
	if a.status != "cancelled" || a.types[len(a.types)-1] != "run.cancelled" {
		t.Fatalf("parked: %s, log %v", a.status, a.types)
	}
	// Nothing was sent before the receiver's Retry-After came due, the
	// resume's execution included (the next try's time is the effect
	// record's).
	mu.Lock()
	sent := tries["/parked"]
	mu.Unlock()
	if sent != 1 {
		t.Fatalf("the parked delivery was sent %d times, its Retry-After never due", sent)
	}

	// A node-graph run whose side-effecting node the receiver refuses: it
	// fails; a retry is a new run with a log of its own; a replay fork
	// fails as its source did and sends nothing; a branch sends again.
	r, m, body := su.do("POST", "/runs", fmt.Sprintf(`{"workflowId":"conformance-replay-ordinal-loop","inputs":{"delayMs":0,"url":%q}}`, recv.URL+"/bad-node"))
	if r.StatusCode != 201 {
		t.Fatalf("createRun: %d %s", r.StatusCode, body)
	}
	failed := m["runId"].(string)
	a = su.await(failed, "the refused node fails the run", ended)
	fsnap, _ := su.get(failed)
	if a.status != "failed" || count(a.types, "node.failed") != 1 || a.types[len(a.types)-1] != "run.failed" {
		t.Fatalf("failed graph run: %s, log %v", a.status, a.types)
	}
	sentTo := func(path string) int {
		mu.Lock()
		defer mu.Unlock()
		return tries[path]
	}
	before := sentTo("/bad-node")
	r, m, body = su.do("POST", "/runs/"+pathID(failed)+"/retry", "")
	if r.StatusCode != 201 {
		t.Fatalf("retry: %d %s", r.StatusCode, body)
	}
	ra := su.await(m["runId"].(string), "the retry fails", ended)
	if ra.status != "failed" || ra.types[0] != "run.started" {
		t.Fatalf("retry: %s, log %v", ra.status, ra.types)
	}
	if sentTo("/bad-node") != before+1 {
		t.Fatalf("the retry sent %d times", sentTo("/bad-node")-before)
	}
	before = sentTo("/bad-node")
	r, m, body = su.do("POST", "/runs/"+pathID(failed)+":fork", `{"mode":"replay","fromSeq":1}`)
	if r.StatusCode != 201 {
		t.Fatalf("replay fork: %d %s", r.StatusCode, body)
	}
	replay := m["runId"].(string)
	pa := su.await(replay, "the replay ends", ended)
	psnap, _ := su.get(replay)
	pe, _ := json.Marshal(psnap["error"])
	fe, _ := json.Marshal(fsnap["error"])
	if pa.status != "failed" || string(pe) != string(fe) {
		t.Fatalf("replay of a failed run: %s %s (the source's %s), log %v", pa.status, pe, fe, pa.types)
	}
	if sentTo("/bad-node") != before {
		t.Fatalf("the replay fork sent %d times", sentTo("/bad-node")-before)
	}
	r, m, body = su.do("POST", "/runs/"+pathID(failed)+":fork", `{"mode":"branch","fromSeq":1}`)
	if r.StatusCode != 201 {
		t.Fatalf("branch fork: %d %s", r.StatusCode, body)
	}
	if ba := su.await(m["runId"].(string), "the branch ends", ended); ba.status != "failed" || sentTo("/bad-node") != before+1 {
		t.Fatalf("branch of a failed run: %s, sent %d, log %v", ba.status, sentTo("/bad-node")-before, ba.types)
	}

	// Runs a breached cap ends: failed with the cap's code, after a
	// cap.breached of its kind, the snapshot's error run.failed's.
	for _, c := range []struct {
		delayMs         int
		run, code, kind string
	}{
		{60000, `{"version":1,"run":{"runTimeoutMs":500}}`, "run_timeout", "run-duration"},
		{0, `{"version":1,"run":{"maxLoopIterations":1}}`, "loop_limit_exceeded", "loop-iterations"},
	} {
		r, m, body := su.do("POST", "/runs", fmt.Sprintf(`{"workflowId":"conformance-replay-ordinal-loop","inputs":{"delayMs":%d,"url":%q},"configurable":%s}`,
			c.delayMs, recv.URL+"/ok", c.run))
		if r.StatusCode != 201 {
			t.Fatalf("createRun: %d %s", r.StatusCode, body)
		}
		id := m["runId"].(string)
		x := su.await(id, c.code, ended)
		snap, _ := su.get(id)
		e, _ := snap["error"].(map[string]any)
		n := len(x.types)
		if x.status != "failed" || e["code"] != c.code || x.types[n-1] != "run.failed" || x.types[n-2] != "cap.breached" {
			t.Fatalf("%s: %s %v, log %v", c.code, x.status, snap["error"], x.types)
		}
		var cb struct {
			Payload struct{ Kind string } `json:"payload"`
		}
		_ = json.Unmarshal(x.raw[n-2], &cb)
		if cb.Payload.Kind != c.kind {
			t.Fatalf("%s: cap.breached %s", c.code, x.raw[n-2])
		}
	}
}
