package apifn

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// CodeUnsupportedStreamMode is the registry code (400) of a streamMode
// outside the pattern of streamRunEvents.
const CodeUnsupportedStreamMode = "unsupported_stream_mode"

// CodeRunFailed is the vendor error code carried by a run.failed event and a
// failed run's snapshot error: the
// host records a failed run's message, not a registry code.
const CodeRunFailed = "idemkit.run_failed"

// EventsRetryMs is the SSE `retry:` hint (milliseconds) sent while the run
// is not terminal: how long an EventSource waits before it re-polls with
// Last-Event-ID.
const EventsRetryMs = 2000

// Stream modes (the OpenWOP event-stream modes). The host serves all four; combinations of
// updates, messages and debug are accepted, values never combines.
const (
	ModeValues   = "values"
	ModeUpdates  = "updates"
	ModeMessages = "messages"
	ModeDebug    = "debug"
)

// Run event types this host records (registered RunEventDoc types).
const (
	EventRunStarted   = "run.started"
	EventRunCompleted = "run.completed"
	EventRunFailed    = "run.failed"
	EventRunCancelled = "run.cancelled"
)

// maxBufferMs bounds the bufferMs batching hint (openapi: 0..5000).
const maxBufferMs = 5000

// RunEvent is one RunEventDoc (run-event.schema.json): the closed v2 event
// envelope. Sequence is the one ordering field (first event 0).
type RunEvent struct {
	EventID string `json:"eventId"`
	RunID   string `json:"runId"`
	// NodeID is set on node-scoped events (node.*).
	NodeID        string `json:"nodeId,omitempty"`
	Type          string `json:"type"`
	Payload       any    `json:"payload"`
	Timestamp     string `json:"timestamp"`
	Sequence      int64  `json:"sequence"`
	SchemaVersion int    `json:"schemaVersion"`
}

// RunEvents returns the event log of r as far as the run record can tell it
// truthfully. The runs table keeps one item per run (current status,
// createdAt, updatedAt, error), not an append-only log, so the log this host
// can derive has at most two events, with stable sequences that are never
// renumbered:
//
//   - sequence 0, run.started, at createdAt: the run was accepted by
//     createRun (payload {workflowId}; the run's inputs are not echoed,
//     exactly as GET /runs/{runId} does not). The moment an executor picked
//     the run up (pending -> running) is not recorded and has no event.
//   - sequence 1, once the run is terminal and only then: run.completed
//     (payload {outputs: {}, durationMs}: this host records no workflow
//     outputs), run.failed ({error: {code, message}, durationMs}: code
//     run_timeout or loop_limit_exceeded for a run a breached cap ended,
//     else idemkit.run_failed) or run.cancelled ({durationMs, reason?}:
//     the cancel request's reason, when it gave one), at
//     updatedAt, the time of the terminal transition, or at the event
//     before it when that is later (clocks disagree: atOrAfter).
//     durationMs is that time - createdAt.
//
// A terminal status is final (transitions are compare-and-set), so event 1
// never changes once it exists. eventId is a stable digest of (runId,
// sequence): the same event has the same id on every read.
//
// A run with a node graph (Run.Log) has its node events between the two,
// in the order recorded, and a run a breached cap ended has its
// cap.breached event last among them; a fork starts with its inherited history (see
// logEvents). The terminal event follows the last of them. No event's
// time is before the time of the event ahead of it.
func RunEvents(r runs.Run) []RunEvent {
	evs, next, last := logEvents(r)
	if !r.Status.Terminal() {
		return evs
	}
	end := atOrAfter(r.UpdatedAt, last)
	dur := end.Sub(r.CreatedAt).Milliseconds()
	if dur < 0 {
		dur = 0
	}
	var typ string
	var payload map[string]any
	switch r.Status {
	case runs.StatusCompleted:
		typ, payload = EventRunCompleted, map[string]any{"outputs": map[string]any{}, "durationMs": dur}
	case runs.StatusFailed:
		typ, payload = EventRunFailed, map[string]any{"error": map[string]any{"code": failureCode(r), "message": failureMessage(r)}, "durationMs": dur}
	default: // runs.StatusCancelled
		typ, payload = EventRunCancelled, map[string]any{"durationMs": dur}
		if r.CancelReason != "" {
			payload["reason"] = r.CancelReason
		}
	}
	return append(evs, newRunEvent(r, next, typ, end, payload))
}

func newRunEvent(r runs.Run, seq int64, typ string, at time.Time, payload any) RunEvent {
	return RunEvent{EventID: eventID(r.ID, seq), RunID: r.ID, Type: typ, Payload: payload,
		Timestamp: at.UTC().Format(time.RFC3339Nano), Sequence: seq, SchemaVersion: 1}
}

// eventID is base64url(sha256("idemkit:run-event:v1\0" runId "\0" seq)),
// 43 characters of the eventId grammar [A-Za-z0-9._~-]{16,128}.
func eventID(runID string, seq int64) string {
	s := sha256.Sum256([]byte("idemkit:run-event:v1\x00" + runID + "\x00" + strconv.FormatInt(seq, 10)))
	return base64.RawURLEncoding.EncodeToString(s[:])
}

// streamQuery is a validated streamRunEvents request.
type streamQuery struct {
	modes    []string // deduplicated, request order; ["values"] or a subset of updates|messages|debug
	bufferMs int
	after    int64 // resume after this sequence; -1 = from the start
}

// parseStreamQuery validates streamMode and bufferMs before the run is
// read. streamMode defaults to updates. Last-Event-ID is not read here
// (parseLastEventID, after the run is read and the caller may read it).
func parseStreamQuery(ev events.APIGatewayV2HTTPRequest) (streamQuery, *apierr.Error) {
	q := streamQuery{modes: []string{ModeUpdates}, after: -1}
	params, err := queryParams(ev)
	if err != nil {
		return q, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the query string is malformed")
	}
	if vs, ok := params["streamMode"]; ok {
		modes, ok := parseModes(vs)
		if !ok {
			return q, unsupportedStreamMode()
		}
		q.modes = modes
	}
	if vs, ok := params["bufferMs"]; ok {
		n, ok := parseBounded(vs[0], 0, maxBufferMs)
		if len(vs) != 1 || !ok {
			return q, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "bufferMs must be an integer 0..%d", maxBufferMs).
				WithDetails(map[string]any{"field": "bufferMs"})
		}
		q.bufferMs = int(n)
	}
	return q, nil
}

// parseLastEventID reads the Last-Event-ID header: the sequence to resume
// after, -1 without the header or with an empty one (an EventSource whose
// last id was empty sends none); a value that is not a non-negative integer
// is 400 validation_error. It is evaluated only once the caller is known
// to read the run (events.md §Resuming): for a run the caller cannot read
// the answer is the one without the header.
func parseLastEventID(ev events.APIGatewayV2HTTPRequest) (int64, *apierr.Error) {
	id := header.First(ev.Headers, "Last-Event-ID")
	if id == "" {
		return -1, nil
	}
	n, ok := parseCursor(id)
	if !ok {
		return -1, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "Last-Event-ID must be an event sequence (a non-negative integer)").
			WithDetails(map[string]any{"field": "Last-Event-ID"})
	}
	return n, nil
}

// unsupportedStreamMode is the answer to a streamMode outside the pattern,
// on streamRunEvents and pollRunEvents alike: 400 unsupported_stream_mode
// whose details.supported lists each mode this host serves (the registry
// row requires it; combinations are not listed).
func unsupportedStreamMode() *apierr.Error {
	return apierr.New(http.StatusBadRequest, CodeUnsupportedStreamMode,
		"streamMode must be values, or a comma-separated combination of updates, messages and debug").
		WithDetails(map[string]any{"supported": []string{ModeValues, ModeUpdates, ModeMessages, ModeDebug}})
}

// queryParams reads the raw query string (what API Gateway and `idemkit dev`
// pass), falling back to the decoded map when only that is set.
func queryParams(ev events.APIGatewayV2HTTPRequest) (url.Values, error) {
	if ev.RawQueryString != "" {
		return url.ParseQuery(ev.RawQueryString)
	}
	v := url.Values{}
	for k, s := range ev.QueryStringParameters {
		v.Set(k, s)
	}
	return v, nil
}

// parseModes applies the streamMode pattern
// ^(values|(updates|messages|debug)(,(updates|messages|debug))*)$ to a
// single parameter value (a repeated parameter is refused).
func parseModes(vs []string) ([]string, bool) {
	if len(vs) != 1 {
		return nil, false
	}
	if vs[0] == ModeValues {
		return []string{ModeValues}, true
	}
	var modes []string
	for _, m := range strings.Split(vs[0], ",") {
		switch m {
		case ModeUpdates, ModeMessages, ModeDebug:
		default:
			return nil, false
		}
		if !contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return modes, true
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// admits returns the mode that admits an event of type typ, the first
// requested mode that does (it names the frame in a combination): debug
// admits every event of the log; updates the updates tier (updatesTier);
// messages AI output chunks, which this host never records (it runs no AI
// nodes), so none.
func admits(modes []string, typ string) (string, bool) {
	for _, m := range modes {
		if m == ModeDebug || m == ModeUpdates && updatesTier(typ) {
			return m, true
		}
	}
	return "", false
}

// updatesTier reports whether the updates stream mode carries an event of
// type typ (events.md §Stream modes): run transitions, terminal node
// transitions, suspensions, node.dispatched, interrupt events,
// artifact.created, eval.*, deployment.* and workspace.updated. Every
// other event (node.started, cap.breached, replay.diverged and vendor
// events among them) is debug's only.
func updatesTier(typ string) bool {
	switch typ {
	case "node.completed", "node.failed", "node.suspended", "node.dispatched", "artifact.created", "workspace.updated":
		return true
	}
	for _, p := range []string{"run.", "interrupt.", "approval.", "clarification.", "eval.", "deployment."} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

// events serves GET /runs/{runId}/events (streamRunEvents) as a snapshot of
// the run's event log in text/event-stream framing (RFC 8895 / HTML SSE).
//
// API Gateway HTTP APIs buffer a Lambda's whole response, so this host cannot
// hold a connection open: it answers with every event after Last-Event-ID
// that the run record supports (see RunEvents) and closes the stream after
// the current state. A client re-polls with Last-Event-ID set to the last
// `id:` it saw (an EventSource does this by itself; while the run is not
// terminal the response carries `retry: 2000`) and receives only what came
// later; after the terminal event (run.completed, run.failed, run.cancelled)
// nothing follows and a client stops. Keep-alive comments are not needed
// because no response stays open. (`idemkit dev`, a net/http server, holds
// a live run's stream open over this answer and its re-reads, with
// keep-alive comments: functions/devstack, devsse.go.)
//
// Frames: `id:` is the sequence, `event:` the event type in a single mode
// (the admitting mode's name in a combination such as updates,debug),
// `data:` the RunEventDoc as one line of JSON. streamMode defaults to
// updates, which carries the updates tier only (updatesTier: not
// node.started, cap.breached or replay.diverged); debug carries every
// event; values sends one `event: state.snapshot` frame whose `data:` is
// the run snapshot of GET /runs/{runId} and whose `id:` is the highest
// sequence of the log (always sent, also on resumption); messages alone
// sends no frames (no AI output). bufferMs > 0 folds the events into one
// `event: batch` frame (`data:` an array, `id:` its highest sequence). A
// streamMode outside the pattern is 400 unsupported_stream_mode with
// details.supported; a malformed bufferMs is 400 validation_error. Both
// are checked before the run is read. Tenancy is GET /runs/{runId}'s:
// another tenant's runId is 403 id_tenant_mismatch (in the router, before
// any read) and an unknown run 404. Last-Event-ID is evaluated only after
// that (events.md §Resuming): a malformed one is 400 validation_error for
// a run the caller reads, while a run it cannot read gets the answer it
// gets without the header; one past the end of the log yields an empty
// stream.
func (h *Handler) events(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	ev, runID, tenant := c.ev, c.runID(), c.tenant
	q, e := parseStreamQuery(ev)
	if e != nil {
		return errResp(e), nil
	}
	r, err := h.cfg.Runs.Get(ctx, runID)
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if q.after, e = parseLastEventID(ev); e != nil {
		return errResp(e), nil
	}
	evs := RunEvents(r)
	var b strings.Builder
	if !r.Status.Terminal() {
		b.WriteString(": snapshot of the run's events; reconnect with Last-Event-ID for later ones\n")
		b.WriteString("retry: " + strconv.Itoa(EventsRetryMs) + "\n\n")
	}
	last := evs[len(evs)-1].Sequence
	if q.modes[0] == ModeValues {
		snap, err := snapshotJSON(h.snapshot(ev, r))
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		writeFrame(&b, last, "state.snapshot", snap)
		return sseResp(b.String()), nil
	}
	var pending []RunEvent
	var names []string // the admitting mode of each pending event
	for _, x := range evs {
		if name, ok := admits(q.modes, x.Type); ok && x.Sequence > q.after {
			pending, names = append(pending, x), append(names, name)
		}
	}
	if len(pending) > 0 && q.bufferMs > 0 {
		data, err := json.Marshal(pending)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		writeFrame(&b, pending[len(pending)-1].Sequence, "batch", data)
		return sseResp(b.String()), nil
	}
	for i, x := range pending {
		data, err := json.Marshal(x)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		frame := x.Type
		if len(q.modes) > 1 {
			frame = names[i]
		}
		writeFrame(&b, x.Sequence, frame, data)
	}
	return sseResp(b.String()), nil
}

// writeFrame writes one SSE event: id, event and one data line per line of
// data (JSON from encoding/json has none, newlines are escaped), then the
// blank line that dispatches it.
func writeFrame(b *strings.Builder, id int64, event string, data []byte) {
	b.WriteString("id: " + strconv.FormatInt(id, 10) + "\n")
	b.WriteString("event: " + event + "\n")
	for _, line := range strings.Split(string(data), "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
}

func sseResp(body string) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: body,
		Headers: map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}}
}
