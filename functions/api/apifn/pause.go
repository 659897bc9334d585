package apifn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// The operations of pausing and resuming a run (runs.md §Pause and
// resume), served at POST /runs/{runId}:pause and POST
// /runs/{runId}:resume under Layer 1 as cancelRun is.
const (
	OpPauseRun  = "pauseRun"
	OpResumeRun = "resumeRun"
)

// checkPauseBody holds pauseRun's optional body to the operation's closed
// schema before anything runs (so a refusal is never an Idempotency-Key's
// answer): no body, or a JSON object of at most MaxBodyBytes with at most
// reason (a string of at most maxCancelReason characters) and drainPolicy
// (drain-current-node or immediate). Anything else is 400
// validation_error naming the field; a non-empty body of another media
// type is 415 unsupported_media_type.
func checkPauseBody(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	return checkClosedBody(ev, "{reason?, drainPolicy?}", map[string]func(json.RawMessage) *apierr.Error{
		"reason": checkReason,
		"drainPolicy": func(v json.RawMessage) *apierr.Error {
			var s *string
			if json.Unmarshal(v, &s) != nil || s == nil || *s == "" || !runs.ValidDrain(*s) {
				return validation("drainPolicy", "drainPolicy must be drain-current-node or immediate").
					WithDetails(map[string]any{"field": "drainPolicy", "allowed": []string{runs.DrainCurrentNode, runs.DrainImmediate}})
			}
			return nil
		},
	})
}

// checkResumeBody holds resumeRun's optional body to its closed schema:
// no body, or a JSON object with at most reason, as checkPauseBody.
func checkResumeBody(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	return checkClosedBody(ev, "{reason?}", map[string]func(json.RawMessage) *apierr.Error{"reason": checkReason})
}

// checkReason checks a body's reason: a string of at most maxCancelReason
// characters.
func checkReason(v json.RawMessage) *apierr.Error {
	var s *string
	if json.Unmarshal(v, &s) != nil || s == nil {
		return validation("reason", "reason must be a string")
	}
	if utf8.RuneCountInString(*s) > maxCancelReason {
		return validation("reason", fmt.Sprintf("reason is at most %d characters", maxCancelReason)).
			WithDetails(map[string]any{"field": "reason", "maxLength": maxCancelReason})
	}
	return nil
}

// checkClosedBody checks an optional body against a closed object schema
// whose members fields check (shape names it in messages).
func checkClosedBody(ev events.APIGatewayV2HTTPRequest, shape string, fields map[string]func(json.RawMessage) *apierr.Error) *apierr.Error {
	m, e := bodyObject(ev, shape)
	if e != nil || m == nil {
		return e
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		check, ok := fields[name]
		if !ok {
			return validation(name, fmt.Sprintf("the body takes no member %q: it is %s", name, shape))
		}
		if e := check(m[name]); e != nil {
			return e
		}
	}
	return nil
}

// bodyString is the string member name of a body its check accepted; ""
// when absent.
func bodyString(ev events.APIGatewayV2HTTPRequest, name string) string {
	body, e := eventBody(ev)
	if e != nil {
		return ""
	}
	var m map[string]json.RawMessage
	var s string
	if json.Unmarshal(body, &m) != nil || json.Unmarshal(m[name], &s) != nil {
		return ""
	}
	return s
}

// pauseStore is the run store's PauseStore; nil when it keeps none (the
// routes then answer 404 not_found, as for an operation not served).
func (h *Handler) pauseStore() runs.PauseStore {
	ps, _ := h.cfg.Runs.(runs.PauseStore)
	return ps
}

// pauseRun serves POST /runs/{runId}:pause: the run moves to paused
// (runs.PauseStore.Pause) and the answer is 202 {runId, status: paused,
// pausedAt}. A run already paused, ended or otherwise not live is 409:
// run_terminal when it ended, else run_state_conflict with
// details.runStatus; so is a run that recorded the most pauses it can
// (runs.MaxPauses, details.maxPauses too). A retry of the pause whose write applied (its
// Idempotency-Key's record not yet written) finds its own pause and
// answers 202 again.
func (h *Handler) pauseRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	ps := h.pauseStore()
	if ps == nil {
		return notFound(), nil
	}
	p := runs.Pause{Drain: bodyString(c.ev, "drainPolicy"), Reason: bodyString(c.ev, "reason"), By: writerBy(ctx)}
	r, err := ps.Pause(ctx, c.runID(), p, h.clock.Now())
	if resp, done, err := stateRefusal(r, c.tenant, err, "paused"); done {
		return resp, err
	}
	return jsonResp(http.StatusAccepted, map[string]any{"runId": c.runID(), "status": runs.StatusPaused,
		"pausedAt": pauseTime(r).Format(time.RFC3339Nano)})
}

// resumeRun serves POST /runs/{runId}:resume: a paused run moves back to
// running (runs.PauseStore.Unpause) and the executor continues it; the
// answer is 202 {runId, status: running, resumedAt}. A run not paused is
// 409: run_terminal when it ended, else run_state_conflict with
// details.runStatus.
func (h *Handler) resumeRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	ps := h.pauseStore()
	if ps == nil {
		return notFound(), nil
	}
	r, err := ps.Unpause(ctx, c.runID(), writerBy(ctx), bodyString(c.ev, "reason"), h.clock.Now())
	if resp, done, err := stateRefusal(r, c.tenant, err, "resumed"); done {
		return resp, err
	}
	return jsonResp(http.StatusAccepted, map[string]any{"runId": c.runID(), "status": runs.StatusRunning,
		"resumedAt": resumeTime(r).Format(time.RFC3339Nano)})
}

// stateRefusal is the answer (done) to a pause or resume the store did not
// apply: 404 for no run of the caller's, 409 for a run in a status that
// refuses it, the error itself for any other.
func stateRefusal(r runs.Run, tenant string, err error, what string) (events.APIGatewayV2HTTPResponse, bool, error) {
	switch {
	case err == nil:
		return events.APIGatewayV2HTTPResponse{}, false, nil
	case errors.Is(err, runs.ErrRunNotFound):
		return notFound(), true, nil
	case errors.Is(err, runs.ErrPauseLimit):
		// Otherwise unpausable (runs.md §Pause and resume): the run
		// recorded the most pauses it can (RED_TEAM 378).
		return errResp(apierr.New(http.StatusConflict, apierr.CodeRunStateConflict,
			"the run was paused the most times a run records (%d, or its pause and resume reasons fill their room): it is not paused again", runs.MaxPauses).
			WithDetails(map[string]any{"runStatus": string(r.Status), "maxPauses": runs.MaxPauses})), true, nil
	case errors.Is(err, runs.ErrStatusConflict):
		if r.Tenant != tenant {
			return notFound(), true, nil
		}
		if r.Status.Terminal() {
			return errResp(apierr.New(http.StatusConflict, apierr.CodeRunTerminal, "the run already ended (%s)", r.Status)), true, nil
		}
		return errResp(apierr.New(http.StatusConflict, apierr.CodeRunStateConflict, "the run is %s: it cannot be %s", r.Status, what).
			WithDetails(map[string]any{"runStatus": string(r.Status)})), true, nil
	}
	return events.APIGatewayV2HTTPResponse{}, true, err
}

// pauseTime is when r's pause was written: the time of its run.paused
// event (held or in the log), else its update time.
func pauseTime(r runs.Run) time.Time {
	if r.PausePending != nil {
		return r.PausePending.At.UTC()
	}
	for i := len(r.Log) - 1; i >= 0; i-- {
		if r.Log[i].Type == runs.EventRunPaused {
			return r.Log[i].At.UTC()
		}
	}
	return r.UpdatedAt.UTC()
}

// resumeTime is when r was resumed: the time of its last run.resumed
// event, else its update time.
func resumeTime(r runs.Run) time.Time {
	for i := len(r.Log) - 1; i >= 0; i-- {
		if r.Log[i].Type == runs.EventRunResumed {
			return r.Log[i].At.UTC()
		}
	}
	return r.UpdatedAt.UTC()
}
