package apifn

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/internal/apierr"
)

// Offline-queued writes. A client that queued a write offline sends it
// later with its Idempotency-Key and the version of the record it decided
// against (decided.Header). cancelRun runs it only when the
// run's changes since that version touch none of its declared inputs
// (cancelInputs); otherwise it answers 409 decided.CodeStale with the
// changed fields (old and new values) and the version to decide against
// now, and keeps the write in the caller's inbox, where it waits to be
// decided again: GET /inbox lists it, POST /inbox/{id}/resubmit runs it
// again (decided against the version the refusal named, or the
// Idempotency-Decided-Version the resubmission carries), POST
// /inbox/{id}/discard drops it.

// cancelInputs are cancelRun's declared inputs: what a cancel decides on.
var cancelInputs = []string{runs.FieldStatus}

// OpCancelRun is the inbox entry operation of a refused cancel.
const OpCancelRun = "cancelRun"

// decidedVersion reads the version the request's write was decided
// against: its Idempotency-Decided-Version or its If-Match (the run's
// ETag), all values, any letter case (idem.ParseDecided).
func decidedVersion(ev events.APIGatewayV2HTTPRequest) (int64, bool, error) {
	var vs, ms []string
	for k, v := range ev.Headers {
		switch {
		case strings.EqualFold(k, decided.Header):
			vs = append(vs, v)
		case strings.EqualFold(k, decided.HeaderIfMatch):
			ms = append(ms, v)
		}
	}
	return decided.Parse(vs, ms)
}

func decidedInvalid(err error) events.APIGatewayV2HTTPResponse {
	st, hd, body := decided.Invalid(err)
	return events.APIGatewayV2HTTPResponse{StatusCode: st, Headers: hd, Body: string(body)}
}

// cancel moves the tenant's run to cancelled. With a decided version, it
// first checks the run's changes since then against cancelInputs and moves
// the run only from the status it checked; a stale decision is kept in the
// inbox as entryID (a new id under the request's claim when "") and
// answered 409 with the fix, stale true.
func (h *Handler) cancel(ctx context.Context, tenant, caller, runID string, version int64, hasDecided bool, entryID string) (resp events.APIGatewayV2HTTPResponse, stale bool, err error) {
	live := []runs.Status{runs.StatusPending, runs.StatusRunning}
	from := live
	if hasDecided {
		r, err := h.cfg.Runs.Get(ctx, runID)
		if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != tenant) {
			return notFound(), false, nil
		}
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, false, err
		}
		if resp, stale, done, err := h.checkDecided(ctx, r, caller, version, entryID); done || err != nil {
			return resp, stale, err
		}
		// Nothing the cancel decides on changed: move the run only from the
		// status the approver saw (its status now).
		from = []runs.Status{r.Status}
		if r.Status.Terminal() {
			from = live
		}
	}
	r, err := h.cfg.Runs.Transition(ctx, runID, from, runs.StatusCancelled, "", h.clock.Now())
	switch {
	case errors.Is(err, runs.ErrRunNotFound):
		return notFound(), false, nil
	case errors.Is(err, runs.ErrStatusConflict):
		if r.Tenant != tenant {
			return notFound(), false, nil
		}
		if hasDecided {
			// The status moved between the check and the write: check again
			// against the run as it is now.
			if resp, stale, done, err := h.checkDecided(ctx, r, caller, version, entryID); done || err != nil {
				return resp, stale, err
			}
		}
		if r.Status != runs.StatusCancelled {
			return errResp(apierr.New(http.StatusConflict, apierr.CodeRunTerminal, "the run already ended (%s)", r.Status)), false, nil
		}
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, false, err
	}
	resp, err = jsonResp(http.StatusOK, map[string]any{"runId": runID, "status": runs.StatusCancelled})
	return resp, false, err
}

// checkDecided answers (done) a decided version the run never had (400) or
// one whose later changes touch cancelInputs (409, kept in the inbox).
func (h *Handler) checkDecided(ctx context.Context, r runs.Run, caller string, version int64, entryID string) (resp events.APIGatewayV2HTTPResponse, stale, done bool, err error) {
	changes, err := r.ChangesSince(version)
	if errors.Is(err, decided.ErrVersionAhead) {
		return decidedInvalid(err), false, true, nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, false, true, err
	}
	touched := decided.Touching(changes, cancelInputs)
	if len(touched) == 0 {
		return events.APIGatewayV2HTTPResponse{}, false, false, nil
	}
	if entryID == "" {
		claim, claimed := idem.FromContext(ctx)
		entryID = runs.InboxEntryID(claim, claimed)
	}
	se := &decided.StaleError{RecordID: r.ID, Decided: version, Current: r.Version, Changes: touched, InboxID: entryID}
	if err := h.cfg.Inbox.Keep(ctx, runs.InboxEntry{ID: entryID, Tenant: r.Tenant, Caller: caller, Operation: OpCancelRun, RecordID: r.ID,
		DecidedVersion: version, CurrentVersion: r.Version, Changes: touched, CreatedAt: h.clock.Now()}); err != nil {
		return events.APIGatewayV2HTTPResponse{}, false, true, err
	}
	st, hd, body := se.Envelope()
	return events.APIGatewayV2HTTPResponse{StatusCode: st, Headers: hd, Body: string(body)}, true, true, nil
}

// listInbox serves GET /inbox: the caller's waiting writes, oldest first,
// as {"entries": [...]}.
func (h *Handler) listInbox(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	all, err := h.cfg.Inbox.List(ctx, c.tenant)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	caller := h.callerOf(c.ev)
	es := make([]runs.InboxEntry, 0, len(all))
	for _, e := range all {
		if e.Caller == caller {
			es = append(es, e)
		}
	}
	return jsonResp(http.StatusOK, map[string]any{"entries": es})
}

// resubmitInboxEntry serves POST /inbox/{id}/resubmit under its own key:
// the waiting write runs again, decided against the request's
// Idempotency-Decided-Version or, without one, the version its refusal
// named. When the check passes the write runs (its own answer is the
// response) and the entry leaves the inbox; when the record changed again
// in what the write decides on, the entry stays (updated) and the answer is
// the 409 with the new fix.
func (h *Handler) resubmitInboxEntry(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	caller := h.callerOf(c.ev)
	e, err := h.cfg.Inbox.Get(ctx, c.tenant, c.entryID())
	if errors.Is(err, runs.ErrInboxEntryNotFound) || err == nil && e.Caller != caller {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	version, present, err := decidedVersion(c.ev)
	if err != nil {
		return decidedInvalid(err), nil
	}
	if !present {
		version = e.CurrentVersion
	}
	if e.Operation != OpCancelRun {
		return errResp(apierr.New(http.StatusConflict, CodeInboxOperationUnknown, "this host cannot run the waiting write's operation %q", e.Operation)), nil
	}
	resp, stale, err := h.cancel(ctx, c.tenant, caller, e.RecordID, version, true, e.ID)
	if err != nil || stale {
		return resp, err
	}
	if resp.StatusCode < 400 || resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusNotFound {
		// Decided again and run (or moot: the run ended or is gone).
		if err := h.cfg.Inbox.Remove(ctx, c.tenant, e.ID); err != nil && !errors.Is(err, runs.ErrInboxEntryNotFound) {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	return resp, nil
}

// CodeInboxOperationUnknown is the vendor error code (HTTP 409) of a
// resubmitted write whose operation this host does not run.
const CodeInboxOperationUnknown = "idemkit.inbox_operation_unknown"

// discardInboxEntry serves POST /inbox/{id}/discard under its own key: the
// waiting write is dropped, never run; 200 {"id", "status": "discarded"},
// 404 when the caller's inbox has no such entry.
func (h *Handler) discardInboxEntry(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	if caller := h.callerOf(c.ev); caller != "" {
		// Only the caller that queued the write finds it (one more read,
		// under a policy whose caller is more than the tenant).
		e, err := h.cfg.Inbox.Get(ctx, c.tenant, c.entryID())
		if errors.Is(err, runs.ErrInboxEntryNotFound) || err == nil && e.Caller != caller {
			return notFound(), nil
		}
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	err := h.cfg.Inbox.Remove(ctx, c.tenant, c.entryID())
	if errors.Is(err, runs.ErrInboxEntryNotFound) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return jsonResp(http.StatusOK, map[string]any{"id": c.entryID(), "status": "discarded"})
}
