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

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem/decided"
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

// pauseInputs and resumeInputs are pauseRun's and resumeRun's declared
// inputs, what each decides on (a pause is for a live run, a resume for a
// paused one): an offline-decided pause or resume is refused when the
// run's status changed since the version it was decided against.
var (
	pauseInputs  = []string{runs.FieldStatus}
	resumeInputs = []string{runs.FieldStatus}
)

// pauseRun serves POST /runs/{runId}:pause: the run moves to paused
// (runs.PauseStore.Pause) and the answer is 202 {runId, status: paused,
// pausedAt}. A run already paused, ended or otherwise not live is 409:
// run_terminal when it ended, else run_state_conflict with
// details.runStatus; so is a run that recorded the most pauses it can
// (runs.MaxPauses, details.maxPauses too). A retry of the pause whose write applied (its
// Idempotency-Key's record not yet written) finds its own pause and
// answers 202 again. With Idempotency-Decided-Version or If-Match the
// pause was decided offline against that version of the run: it is
// refused, and kept in the caller's inbox, when the run's status changed
// since (RED_TEAM 386; inbox.go).
func (h *Handler) pauseRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	if h.pauseStore() == nil {
		return notFound(), nil
	}
	d, err := decidedVersion(c.ev)
	if err != nil {
		return decidedInvalid(err), nil
	}
	resp, _, err := h.pause(ctx, c.tenant, h.callerOf(c.ev), c.runID(), bodyString(c.ev, "drainPolicy"), bodyString(c.ev, "reason"), d, resubmission{})
	return resp, err
}

// pause pauses the tenant's run with drain and reason (a request's, or a
// resubmitted inbox entry's). With a decided version, the store checks
// the run's changes since then against pauseInputs on the run its
// compare-and-set writes (decidedGuard); a stale decision is kept in the
// inbox (rs, as cancel's) and answered 409 with the fix, stale true.
func (h *Handler) pause(ctx context.Context, tenant, caller, runID, drain, reason string, d decision, rs resubmission) (resp events.APIGatewayV2HTTPResponse, stale bool, err error) {
	ps := h.pauseStore()
	if ps == nil {
		return notFound(), false, nil
	}
	p := runs.Pause{Drain: drain, Reason: reason, By: writerBy(ctx)}
	var r runs.Run
	gs, guarded := ps.(runs.GuardedPauseStore)
	switch g := decidedGuard(tenant, d, pauseInputs); {
	case !d.checked():
		r, err = ps.Pause(ctx, runID, p, h.clock.Now())
	case guarded:
		r, err = gs.PauseGuarded(ctx, runID, p, g, h.clock.Now())
	default:
		if r, err = h.precheck(ctx, runID, func(r runs.Run) bool { return r.PausedBy == p.By }, g); err == nil {
			r, err = ps.Pause(ctx, runID, p, h.clock.Now())
		}
	}
	if resp, stale, done, err := h.staleAnswer(ctx, r, err, d, rs, inbox.Entry{Caller: caller, Operation: OpPauseRun, Reason: reason, DrainPolicy: drain}); done {
		return resp, stale, err
	}
	if resp, done, err := stateRefusal(r, tenant, err, "paused"); done {
		return resp, false, err
	}
	resp, err = pausedResp(runID, r)
	return resp, false, err
}

// pausedResp is pauseRun's 202 for r, paused.
func pausedResp(runID string, r runs.Run) (events.APIGatewayV2HTTPResponse, error) {
	return jsonResp(http.StatusAccepted, map[string]any{"runId": runID, "status": runs.StatusPaused,
		"pausedAt": pauseTime(r).Format(time.RFC3339Nano)})
}

// resumeRun serves POST /runs/{runId}:resume: a paused run moves back to
// running (runs.PauseStore.Unpause) and the executor continues it; the
// answer is 202 {runId, status: running, resumedAt}. A run not paused is
// 409: run_terminal when it ended, else run_state_conflict with
// details.runStatus. With Idempotency-Decided-Version or If-Match the
// resume was decided offline, checked as pauseRun's.
func (h *Handler) resumeRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	if h.pauseStore() == nil {
		return notFound(), nil
	}
	d, err := decidedVersion(c.ev)
	if err != nil {
		return decidedInvalid(err), nil
	}
	resp, _, err := h.resume(ctx, c.tenant, h.callerOf(c.ev), c.runID(), bodyString(c.ev, "reason"), d, resubmission{})
	return resp, err
}

// resume is pause's resume with reason, checked against resumeInputs.
func (h *Handler) resume(ctx context.Context, tenant, caller, runID, reason string, d decision, rs resubmission) (resp events.APIGatewayV2HTTPResponse, stale bool, err error) {
	ps := h.pauseStore()
	if ps == nil {
		return notFound(), false, nil
	}
	by := writerBy(ctx)
	var r runs.Run
	gs, guarded := ps.(runs.GuardedPauseStore)
	switch g := decidedGuard(tenant, d, resumeInputs); {
	case !d.checked():
		r, err = ps.Unpause(ctx, runID, by, reason, h.clock.Now())
	case guarded:
		r, err = gs.UnpauseGuarded(ctx, runID, by, reason, g, h.clock.Now())
	default:
		if r, err = h.precheck(ctx, runID, func(r runs.Run) bool { return r.ResumedBy == by }, g); err == nil {
			r, err = ps.Unpause(ctx, runID, by, reason, h.clock.Now())
		}
	}
	if resp, stale, done, err := h.staleAnswer(ctx, r, err, d, rs, inbox.Entry{Caller: caller, Operation: OpResumeRun, Reason: reason}); done {
		return resp, stale, err
	}
	if resp, done, err := stateRefusal(r, tenant, err, "resumed"); done {
		return resp, false, err
	}
	resp, err = resumedResp(runID, r)
	return resp, false, err
}

// resumedResp is resumeRun's 202 for r, resumed.
func resumedResp(runID string, r runs.Run) (events.APIGatewayV2HTTPResponse, error) {
	return jsonResp(http.StatusAccepted, map[string]any{"runId": runID, "status": runs.StatusRunning,
		"resumedAt": resumeTime(r).Format(time.RFC3339Nano)})
}

// decidedGuard is the store's guard (runs.Guard) of a write decided
// against d that decides on inputs: another tenant's run is no run
// (runs.ErrRunNotFound); a version the run never had is
// decided.ErrVersionAhead; a run whose changes since d touch inputs is
// the refusal (*decided.StaleError, no inbox id yet). Nil for a write
// that is not checked.
func decidedGuard(tenant string, d decision, inputs []string) runs.Guard {
	if !d.checked() {
		return nil
	}
	return func(r runs.Run) error {
		if r.Tenant != tenant {
			return runs.ErrRunNotFound
		}
		se, err := staleSince(r, d, inputs)
		if err != nil {
			return err
		}
		if se != nil {
			return se
		}
		return nil
	}
}

// precheck is a decided pause's or resume's check on a run store that
// takes no guard (not a runs.GuardedPauseStore): g on a read of the run
// before the write, as cancel checks, unless the run holds the request's
// own write (own: a retry of a write that applied). The write that follows
// is not conditional on what g read.
func (h *Handler) precheck(ctx context.Context, runID string, own func(runs.Run) bool, g runs.Guard) (runs.Run, error) {
	r, err := h.cfg.Runs.Get(ctx, runID)
	if err != nil || own(r) {
		return r, err
	}
	return r, g(r)
}

// staleAnswer answers (done) a decided write's guard refusal: a stale
// decision kept in the inbox as e (keepStale; e's tenant is the run's)
// and answered 409 with the fix (stale true), or a decided version the run
// never had (400 naming the header that carried it).
func (h *Handler) staleAnswer(ctx context.Context, r runs.Run, err error, d decision, rs resubmission, e inbox.Entry) (resp events.APIGatewayV2HTTPResponse, stale, done bool, _ error) {
	var se *decided.StaleError
	switch {
	case errors.As(err, &se):
		e.Tenant = r.Tenant
		resp, err := h.keepStale(ctx, se, e, rs)
		return resp, err == nil, true, err
	case errors.Is(err, decided.ErrVersionAhead):
		return d.invalid(err), false, true, nil
	}
	return events.APIGatewayV2HTTPResponse{}, false, false, nil
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
