package apifn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/ledger"
)

// CodeForkPointInvalid is the registry code (422) of a fromSeq the source
// log does not hold, one past its terminal event, or whose range is past
// retention.
const CodeForkPointInvalid = "fork_point_invalid"

// DefaultForkRetention is how long after its creation a run can be forked
// (Config.ForkRetention's default): the Layer-2 records a replay resolves
// from are kept ledger.MinRetention (14 days) after their last write, so a
// run younger than that still has every record it wrote.
const DefaultForkRetention = ledger.MinRetention

// CodeForkDepthExceeded is the vendor error code (HTTP 422) of a fork
// whose ancestry would be longer than MaxForkDepth (the OpenWOP registry
// has no row for it); details {limit, depth}.
const CodeForkDepthExceeded = "idemkit.fork_depth_exceeded"

// MaxForkDepth is the longest ancestry a fork can have: a fork of a run
// that is no fork has 1, a fork of a fork one more than its source. The
// fork's item records its ancestry (runs.Fork.Ancestry, about 350 bytes a
// generation for the longest tenant), and DynamoDB refuses an item past
// 400 KB: the largest run the host accepts with this many generations
// fits on every engine.
const MaxForkDepth = 100

// maxSeq bounds fromSeq (the JSON integers every client reads exactly).
const maxSeq = 1<<53 - 1

// forkRequest is a validated forkRun body.
type forkRequest struct {
	mode    runs.ForkMode
	fromSeq int64
	hasSeq  bool
}

// readFork reads forkRun's body (parseFork).
func readFork(ev events.APIGatewayV2HTTPRequest) (*forkRequest, *apierr.Error) {
	body, e := eventBody(ev)
	if e != nil {
		return nil, e
	}
	req, e := parseFork(body)
	if e != nil {
		return nil, e
	}
	return &req, nil
}

// precheckFork is forkRun's Route.precheck: its body read before the
// claim (readFork), kept for forkRun.
func (h *Handler) precheckFork(c *call) *apierr.Error {
	req, e := readFork(c.ev)
	c.fork = req
	return e
}

// parseFork validates a forkRun body: {mode: replay|branch, fromSeq?,
// runOptionsOverlay?}, nothing else. fromSeq is required for branch and
// defaults to 0 for replay. runOptionsOverlay is branch-only (a non-empty
// one on a replay is 400), and this host refuses a non-empty one on a
// branch too (400): it applies no overlay (a fork keeps its source's run
// options: configurable, tags, metadata), and accepting one would tell
// the caller it had. An absent, null or empty overlay is accepted in both
// modes.
func parseFork(body []byte) (forkRequest, *apierr.Error) {
	var req forkRequest
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&raw); err != nil || raw == nil || dec.More() {
		return req, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object {mode, fromSeq?, runOptionsOverlay?}")
	}
	for k := range raw {
		if k != "mode" && k != "fromSeq" && k != "runOptionsOverlay" {
			return req, validation(k, strconv.Quote(k)+" is an unknown field; the body is {mode, fromSeq?, runOptionsOverlay?}")
		}
	}
	var mode string
	if m, ok := raw["mode"]; !ok {
		return req, validation("mode", "mode is required: replay or branch")
	} else if json.Unmarshal(m, &mode) != nil || (mode != string(runs.ForkReplay) && mode != string(runs.ForkBranch)) {
		// Given but not one of the two: said so, not called missing (RED_TEAM 588).
		return req, validation("mode", "mode must be replay or branch (the fork's mode, a JSON string)")
	}
	req.mode = runs.ForkMode(mode)
	if s, ok := raw["fromSeq"]; ok {
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(s))
		d.UseNumber()
		// null decodes into a json.Number as "" without an error: it is
		// no number either (RED_TEAM 427).
		if len(s) == 0 || s[0] == '"' || d.Decode(&n) != nil || n == "" {
			return req, validation("fromSeq", "fromSeq must be a non-negative integer sequence")
		}
		i, err := seqOf(n)
		switch {
		case errors.Is(err, errNotInteger):
			return req, validation("fromSeq", "fromSeq must be an integer (an event sequence), not "+string(n))
		case err == nil && i < 0:
			return req, validation("fromSeq", "fromSeq must be a non-negative integer sequence")
		case err != nil || i > maxSeq:
			return req, validation("fromSeq", "fromSeq is out of range: a non-negative integer sequence of at most "+strconv.FormatInt(maxSeq, 10))
		}
		req.fromSeq, req.hasSeq = i, true
	}
	if req.mode == runs.ForkBranch && !req.hasSeq {
		return req, validation("fromSeq", "fromSeq is required for a branch (the branch point)")
	}
	if o, ok := raw["runOptionsOverlay"]; ok && string(o) != "null" {
		var m map[string]json.RawMessage
		if json.Unmarshal(o, &m) != nil || m == nil {
			return req, validation("runOptionsOverlay", "runOptionsOverlay must be an object")
		}
		if req.mode == runs.ForkReplay && len(m) > 0 {
			return req, validation("runOptionsOverlay", "runOptionsOverlay is branch-only: a replay takes none")
		}
		if len(m) > 0 {
			return req, validation("runOptionsOverlay", "this host applies no runOptionsOverlay: a branch keeps its source's run options "+
				"(configurable, tags, metadata) and re-executes the source's workflow and inputs; send none or {}")
		}
	}
	return req, nil
}

// errNotInteger: seqOf's number has a fractional part.
var errNotInteger = errors.New("apifn: not an integer")

// seqOf reads the JSON number n as an integer: digits, or any form whose
// value is one (9.0, 0.9e1: JSON Schema's integer is the mathematical
// one), exactly; a fraction is errNotInteger, a value past int64 (or too
// long to be worth exact arithmetic) strconv.ErrRange.
func seqOf(n json.Number) (int64, error) {
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	// No sequence is written longer, or with a larger exponent: both bound
	// big.Rat's work (1e99999999 would be a 100-million-digit integer).
	s := string(n)
	if len(s) > 64 {
		return 0, strconv.ErrRange
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		if e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+")); err != nil || e > 100 || e < -100 {
			return 0, strconv.ErrRange
		}
	}
	r, ok := new(big.Rat).SetString(s)
	switch {
	case !ok:
		return 0, strconv.ErrSyntax
	case !r.IsInt():
		return 0, errNotInteger
	case !r.Num().IsInt64():
		return 0, strconv.ErrRange
	}
	return r.Num().Int64(), nil
}

// validation is a 400 validation_error naming field in details.field; msg
// is the whole message (it names the field itself).
func validation(field, msg string) *apierr.Error {
	return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "%s", msg).WithDetails(map[string]any{"field": field})
}

// forkRun serves POST /runs/{runId}:fork under the Layer-1 claim of the
// fork request's own key: a new run of the source's workflow and inputs
// whose fixed history is the source's events with sequence < fromSeq
// (copied into the fork, runs.Fork.Inherited), answered 201 {runId,
// sourceRunId, fromSeq, mode, status, eventsUrl}. Every execution of one
// key names the same fork (runs.ClaimRunID), so a retried fork request
// never creates a second run. The fork inherits the source's recipe
// stamps (Run.Stamps: recorded history is resolved under the recipes
// it was recorded with), records the host's current ones for new branch
// work (runs.Fork.BranchStamps), and its ancestry (runs.NewFork), so a
// fork of a fork resolves each recorded execution from the run that
// recorded it, under that run's stamps (runs.Run.RecordOf).
//
// Refusals: a body outside the grammar, a branch without fromSeq, or a
// non-empty overlay (runOptionsOverlay: this host applies none), 400; a source the caller cannot see, 404; a
// fromSeq the source log does not hold (past its last event; for a
// finished source, past its terminal event), at or after the source's
// cap.breached (details also {capBreachedSeq}, the boundary the latest
// forkable point, RED_TEAM 511), or a source older than the
// fork retention (Config.ForkRetention; for a replay, the oldest run its
// history's records come from, runs.Run.RecordsSince), 422 fork_point_invalid with
// details {sourceRunId, fromSeq, boundary}; a source whose own ancestry
// is MaxForkDepth long, 422 CodeForkDepthExceeded. A key's re-execution whose
// earlier execution wrote its fork inside the retention (its completion
// was lost) answers that fork, past the boundary too.
func (h *Handler) forkRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	req := c.fork
	if req == nil {
		var e *apierr.Error
		if req, e = readFork(c.ev); e != nil {
			return errResp(e), nil
		}
	}
	src, err := h.cfg.Runs.Get(ctx, c.runID())
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && src.Tenant != c.tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if depth := forkDepth(src) + 1; depth > MaxForkDepth {
		return errResp(apierr.New(http.StatusUnprocessableEntity, CodeForkDepthExceeded,
			"the fork would be generation %d of a chain of forks; at most %d are kept (fork the run the chain started from instead)", depth, MaxForkDepth).
			WithDetails(map[string]any{"limit": MaxForkDepth, "depth": depth})), nil
	}
	log := RunEvents(src)
	last := log[len(log)-1].Sequence
	if req.fromSeq > last {
		return errResp(apierr.New(http.StatusUnprocessableEntity, CodeForkPointInvalid,
			"fromSeq %d is not in the source run's log (its last event is %d)", req.fromSeq, last).
			WithDetails(map[string]any{"sourceRunId": src.ID, "fromSeq": req.fromSeq, "boundary": last})), nil
	}
	// A run a cap ended records cap.breached before its terminal event: a
	// fork from it or after it would inherit the breach as fixed history
	// and then execute (RED_TEAM 511), as one past the terminal event would.
	for _, e := range log {
		if e.Type == runs.EventCapBreached {
			if req.fromSeq >= e.Sequence {
				return errResp(apierr.New(http.StatusUnprocessableEntity, CodeForkPointInvalid,
					"the source run was ended by a cap at sequence %d (cap.breached): fromSeq %d is at or after it; the latest forkable point is %d",
					e.Sequence, req.fromSeq, e.Sequence-1).
					WithDetails(map[string]any{"sourceRunId": src.ID, "fromSeq": req.fromSeq, "boundary": e.Sequence - 1, "capBreachedSeq": e.Sequence})), nil
			}
			break
		}
	}
	// A run at this request's run id is its own when it forks src.
	ours := func(got runs.Run) bool {
		return got.Tenant == c.tenant && got.Fork != nil && got.Fork.SourceRunID == src.ID
	}
	retention := h.forkRetention()
	// A replay resolves its executions from the records of the runs its
	// source's history comes from (a fork's original, a branch), kept the
	// retention after their writes: the earliest of them bounds it
	// (RED_TEAM 470). A branch resolves nothing from a record.
	since := src.CreatedAt
	if req.mode == runs.ForkReplay {
		since = src.RecordsSince()
	}
	if boundary := since.Add(retention); h.clock.Now().After(boundary) {
		// A re-execution of this key whose earlier execution, inside the
		// retention, wrote its fork (its completion was lost) is answered
		// that fork below (createClaimedRun), not refused by the clock.
		earlier, err := h.writtenEarlier(ctx, c.tenant, ours)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		if !earlier {
			return pastRetentionResp(src.ID, req.fromSeq, retention, boundary), nil
		}
	}
	inherited, err := inherit(src, req.fromSeq)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	run := runs.NewFork(src, req.mode, req.fromSeq, inherited, h.clock.Now())
	if req.mode == runs.ForkReplay {
		if run.Fork.Recorded, err = recorded(src, req.fromSeq); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		run.Fork.SourceComplete = src.Status.Terminal()
	}
	if _, _, err := h.createClaimedRun(ctx, &run, "", ours); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	base := h.baseURL(c.ev) + "/runs/" + runs.ProjectID(run.ID)
	resp, err := jsonResp(http.StatusCreated, map[string]any{
		"runId": run.ID, "sourceRunId": src.ID, "fromSeq": req.fromSeq, "mode": req.mode,
		"status": run.Status, "eventsUrl": base + "/events",
	})
	if err == nil {
		resp.Headers["Location"] = base
	}
	return resp, err
}

// forkRetention is Config.ForkRetention, DefaultForkRetention unset.
func (h *Handler) forkRetention() time.Duration {
	if h.cfg.ForkRetention > 0 {
		return h.cfg.ForkRetention
	}
	return DefaultForkRetention
}

// pastRetentionResp is the 422 fork_point_invalid of a fork of sourceRunID
// from fromSeq whose recorded history is past the fork retention, kept
// until boundary.
func pastRetentionResp(sourceRunID string, fromSeq int64, retention time.Duration, boundary time.Time) events.APIGatewayV2HTTPResponse {
	return errResp(apierr.New(http.StatusUnprocessableEntity, CodeForkPointInvalid,
		"the source run's recorded history is past the fork retention (%s)", retention).
		WithDetails(map[string]any{"sourceRunId": sourceRunID, "fromSeq": fromSeq, "boundary": boundary.UTC().Format(time.RFC3339Nano)}))
}

// forkDepth is the length of r's ancestry (runs.Fork.Ancestry): 0 for a
// run that is no fork, and for a fork created before the chain was kept
// (1: its source).
func forkDepth(r runs.Run) int {
	if r.Fork == nil {
		return 0
	}
	return max(1, len(r.Fork.Ancestry))
}
