package apifn

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/internal/apierr"
)

// Offline-queued writes. A client that queued a write offline sends it
// later with its Idempotency-Key and the version of the record it decided
// against (decided.Header). cancelRun runs it only when the
// run's changes since that version touch none of its declared inputs
// (cancelInputs), and so do pauseRun and resumeRun (pauseInputs,
// resumeInputs, checked in the store's own compare-and-set: pause.go);
// otherwise each answers 409 decided.CodeStale with the
// changed fields (old and new values) and the version to decide against
// now, and keeps the write in the caller's inbox, where it waits to be
// decided again: GET /inbox lists it, POST /inbox/{id}/resubmit runs it
// again (decided against the version the refusal named, or the
// Idempotency-Decided-Version the resubmission carries), POST
// /inbox/{id}/discard drops it.
//
// A discard and a resubmission of one entry are decided by compare-and-set
// on the entry (inbox.Store.Decide): exactly one wins. A discard that won
// means the write never runs; a resubmission that won holds the entry while
// the write runs. Either way any other decision is 409
// CodeInboxEntryDecided with details {id, state} ("discarded",
// "resubmitting", "resubmitted"), until the decided entry is forgotten
// (inbox.Config.Retention after its decision), when its id is 404 as one
// never kept. Each decision is named after its
// Layer-1 record (inbox.DecisionBy), so a retry with the same
// Idempotency-Key whose first answer was lost (a 5xx after the decision
// landed) finds its own decision and answers as the first would have. A
// resubmission's cancel records the resubmission's Layer-1 record as the
// run's CancelledBy, so its retry answers 200 cancelled only for its own
// cancel and 409 run_terminal for another request's (ranBefore).

// cancelInputs are cancelRun's declared inputs: what a cancel decides on.
var cancelInputs = []string{runs.FieldStatus}

// OpCancelRun is the inbox entry operation of a refused cancel.
const OpCancelRun = "cancelRun"

// decidedVersion reads the version the request's write was decided
// against: its Idempotency-Decided-Version or its If-Match (the run's
// ETag), all values, any letter case (idem.ParseDecided).
func decidedVersion(ev events.APIGatewayV2HTTPRequest) (decision, error) {
	var vs, ms []string
	for k, v := range ev.Headers {
		switch {
		case strings.EqualFold(k, decided.Header):
			vs = append(vs, v)
		case strings.EqualFold(k, decided.HeaderIfMatch):
			ms = append(ms, v)
		}
	}
	v, present, err := decided.Parse(vs, ms)
	d := decision{version: v}
	switch {
	case !present:
	case len(vs) > 0:
		d.from = decided.Header
	default:
		d.from = decided.HeaderIfMatch
	}
	return d, err
}

// decision is the version an offline-decided write was decided against and
// the header that carried it (from: decided.Header or
// decided.HeaderIfMatch; "" for a write that is not checked, and
// decidedByEntry for a resubmission that sent neither).
type decision struct {
	version int64
	from    string
}

// decidedByEntry is decision.from of a resubmission decided against its
// inbox entry's current version.
const decidedByEntry = "inbox entry"

// checked reports whether the write is checked against a decided version.
func (d decision) checked() bool { return d.from != "" }

// invalid is the 400 of a version the record never had, naming the header
// that carried it.
func (d decision) invalid(err error) events.APIGatewayV2HTTPResponse {
	if d.from == decided.HeaderIfMatch {
		err = errors.Join(err, decided.ErrIfMatchInvalid)
	}
	return decidedInvalid(err)
}

func decidedInvalid(err error) events.APIGatewayV2HTTPResponse {
	st, hd, body := decided.Invalid(err)
	return events.APIGatewayV2HTTPResponse{StatusCode: st, Headers: hd, Body: string(body)}
}

// resubmission is the inbox entry a cancel runs for: id, held by the
// decision by (both "" for a cancel sent directly, whose refusal keeps a
// new entry).
type resubmission struct{ id, by string }

// cancel moves the tenant's pending or running run to cancelled, recording
// reason (the request's, "" for none) on it; a run that already ended (completed, failed or cancelled) is 409 run_terminal.
// With a decided version, it first checks the run's changes since then
// against cancelInputs and moves the run only at the version it checked
// (cancelAt; from the status it checked on a store that is not a
// runs.VersionCanceller); a stale decision is kept in the inbox (as rs.id, handed back by rs.by; a
// new id under the request's claim when rs.id is "") and answered 409 with
// the fix, stale true.
func (h *Handler) cancel(ctx context.Context, tenant, caller, runID, reason string, d decision, rs resubmission) (resp events.APIGatewayV2HTTPResponse, stale bool, err error) {
	// A paused run is cancelled as a live one (only a resume or a cancel
	// moves it on).
	live := []runs.Status{runs.StatusPending, runs.StatusRunning, runs.StatusPaused}
	from := live
	// by is this request's Layer-1 record (a hash of its key), recorded on
	// the run it cancels: a retry of a keyed cancel whose attempt that
	// cancelled the run died before its answer was recorded finds its own
	// cancel and answers the 200 it earned, not 409 run_terminal.
	by := writerBy(ctx)
	if d.checked() {
		r, err := h.cfg.Runs.Get(ctx, runID)
		if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != tenant) {
			return notFound(), false, nil
		}
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, false, err
		}
		if cancelledBy(r, by) {
			// Its own change is no stale decision.
			return cancelled(runID)
		}
		if resp, stale, done, err := h.checkDecided(ctx, r, caller, reason, d, rs); done || err != nil {
			return resp, stale, err
		}
		if ca, ok := h.cfg.Runs.(runs.VersionCanceller); ok && !r.Status.Terminal() {
			return h.cancelAt(ctx, ca, r, tenant, caller, reason, by, d, rs)
		}
		// Nothing the cancel decides on changed: move the run only from the
		// status the approver saw (its status now).
		from = []runs.Status{r.Status}
		if r.Status.Terminal() {
			from = live
		}
	}
	r, err := h.cfg.Runs.Cancel(ctx, runID, from, by, reason, h.clock.Now())
	switch {
	case errors.Is(err, runs.ErrRunNotFound):
		return notFound(), false, nil
	case errors.Is(err, runs.ErrStatusConflict):
		if r.Tenant != tenant {
			return notFound(), false, nil
		}
		if cancelledBy(r, by) {
			// This request's earlier attempt cancelled it.
			return cancelled(runID)
		}
		if d.checked() {
			// The status moved between the check and the write: check again
			// against the run as it is now.
			if resp, stale, done, err := h.checkDecided(ctx, r, caller, reason, d, rs); done || err != nil {
				return resp, stale, err
			}
		}
		// Every status outside pending, running and paused is terminal, cancelled
		// too: a cancel of a run that already ended, whoever cancelled it,
		// is refused, never answered 200 echoing the terminal state
		// (runs.md §Cancel). The key that did cancel it replays its 200.
		return errResp(apierr.New(http.StatusConflict, apierr.CodeRunTerminal, "the run already ended (%s)", r.Status)), false, nil
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, false, err
	}
	return cancelled(runID)
}

// cancelTries bounds the versioned cancels of one decided cancel: each
// one refused because the run moved (in no input of the cancel) between
// its check and its write checks the run again.
const cancelTries = 8

// cancelAt is a decided cancel's write on a store that cancels at a
// version (runs.VersionCanceller): the run r passed the check, and is
// cancelled only while still at r's version, so a change between the
// check and the write (a pause and a resume by others leaving the status
// as read included) is never cancelled over: the run as it is now is
// checked again (a stale decision is refused and kept, a change of no
// input cancels at the new version), at most cancelTries times.
func (h *Handler) cancelAt(ctx context.Context, ca runs.VersionCanceller, r runs.Run, tenant, caller, reason, by string, d decision, rs resubmission) (events.APIGatewayV2HTTPResponse, bool, error) {
	runID := r.ID
	for range cancelTries {
		cur, err := ca.CancelAt(ctx, runID, r.Version, by, reason, h.clock.Now())
		switch {
		case err == nil:
			return cancelled(runID)
		case errors.Is(err, runs.ErrRunNotFound):
			return notFound(), false, nil
		case !errors.Is(err, runs.ErrStatusConflict):
			return events.APIGatewayV2HTTPResponse{}, false, err
		case cur.Tenant != tenant:
			return notFound(), false, nil
		case cancelledBy(cur, by):
			// This request's earlier attempt cancelled it.
			return cancelled(runID)
		}
		if resp, stale, done, err := h.checkDecided(ctx, cur, caller, reason, d, rs); done || err != nil {
			return resp, stale, err
		}
		if cur.Status.Terminal() {
			return errResp(apierr.New(http.StatusConflict, apierr.CodeRunTerminal, "the run already ended (%s)", cur.Status)), false, nil
		}
		r = cur
	}
	return events.APIGatewayV2HTTPResponse{}, false, fmt.Errorf("api: cancel run: the run moved on each of %d tries", cancelTries)
}

// cancelled is cancel's 200 {runId, status: cancelled}.
func cancelled(runID string) (events.APIGatewayV2HTTPResponse, bool, error) {
	resp, err := jsonResp(http.StatusOK, map[string]any{"runId": runID, "status": runs.StatusCancelled})
	return resp, false, err
}

// cancelBy is what a cancel made under ctx records as the run's
// CancelledBy: the request's Layer-1 record ID (a hash, never the key);
// "" without an Idempotency-Key. A resubmission's cancel runs under the
// resubmission's own key, so it records the resubmission's record, the
// same for every retry of it.
func cancelBy(ctx context.Context) string {
	if claim, ok := idem.FromContext(ctx); ok {
		return claim.ID
	}
	return ""
}

// onceBy is the CancelledBy of a cancel without an Idempotency-Key: a
// random token of this request alone (prefixed so it never equals a
// Layer-1 record ID), so the store's retry of the cancel's write, whose
// first answer was lost, finds the run cancelled by itself and answers
// 200, while every other request, a retry by the caller included, is
// told the run already ended.
func onceBy() string {
	return "once:" + rand.Text()
}

// writerBy is what a run write records as its writer (CancelledBy,
// PausedBy, ResumedBy): the request's Layer-1 record (cancelBy), or
// onceBy's token for a request without an Idempotency-Key.
func writerBy(ctx context.Context) string {
	if by := cancelBy(ctx); by != "" {
		return by
	}
	return onceBy()
}

// cancelledBy reports whether r was cancelled by the keyed request whose
// Layer-1 record is by ("" never matches: a cancel without a key is never
// told apart from another's).
func cancelledBy(r runs.Run, by string) bool {
	return by != "" && r.Status == runs.StatusCancelled && r.CancelledBy == by
}

// checkDecided answers (done) a decided version the run never had (400) or
// one whose later changes touch cancelInputs (409, kept in the inbox with
// the cancel's reason, which its resubmission cancels with). A
// refusal whose entry another decision already decided (a first
// submission re-run after its entry was discarded or resubmitted) is
// answered without an inbox entry: nothing waits any more.
func (h *Handler) checkDecided(ctx context.Context, r runs.Run, caller, reason string, d decision, rs resubmission) (resp events.APIGatewayV2HTTPResponse, stale, done bool, err error) {
	se, err := staleSince(r, d, cancelInputs)
	if errors.Is(err, decided.ErrVersionAhead) {
		return d.invalid(err), false, true, nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, false, true, err
	}
	if se == nil {
		return events.APIGatewayV2HTTPResponse{}, false, false, nil
	}
	resp, err = h.keepStale(ctx, se, inbox.Entry{Tenant: r.Tenant, Caller: caller, Operation: OpCancelRun, Reason: reason}, rs)
	return resp, err == nil, true, err
}

// staleSince is the refusal (no inbox id yet) of a write decided against
// d whose run r changed since in one of inputs; nil when none did;
// decided.ErrVersionAhead for a version r never had.
func staleSince(r runs.Run, d decision, inputs []string) (*decided.StaleError, error) {
	changes, err := r.ChangesSince(d.version)
	if err != nil {
		return nil, err
	}
	touched := decided.Touching(changes, inputs)
	if len(touched) == 0 {
		return nil, nil
	}
	return &decided.StaleError{RecordID: r.ID, Decided: d.version, Current: r.Version, Changes: touched}, nil
}

// keepStale keeps the refused write se in the caller's inbox as e (its
// tenant, caller, operation and what its resubmission runs it with: its
// reason, a pause's drain policy) and answers the 409 with the fix: as
// rs.id, handed back by rs.by, for a resubmission refused again; under a
// new id (the request's claim's) for a write sent directly. A refusal
// whose entry another decision already decided is answered without an
// inbox id, and so is one a full inbox cannot hold.
func (h *Handler) keepStale(ctx context.Context, se *decided.StaleError, e inbox.Entry, rs resubmission) (events.APIGatewayV2HTTPResponse, error) {
	entryID := rs.id
	if entryID == "" {
		claim, claimed := idem.FromContext(ctx)
		entryID = inbox.EntryID(claim, claimed)
	}
	se.InboxID = entryID
	e.ID, e.RecordID, e.DecidedVersion, e.CurrentVersion, e.Changes, e.CreatedAt = entryID, se.RecordID, se.Decided, se.Current, se.Changes, h.clock.Now()
	err := h.cfg.Inbox.Keep(ctx, e, rs.by)
	switch {
	case errors.Is(err, inbox.ErrDecided):
		se.InboxID = ""
	case errors.Is(err, inbox.ErrFull) && rs.id == "":
		// The tenant's inbox holds no more: the write is refused as
		// stale all the same, not kept (no inboxId), never a 500 that
		// every retry of its key would repeat.
		h.cfg.Logger.WarnContext(ctx, "api: inbox full; a stale write is refused without an entry", slog.String("run_id", se.RecordID))
		se.InboxID = ""
	case errors.Is(err, inbox.ErrFull):
		// A resubmission refused again whose updated entry no longer
		// fits: the entry is handed back as it was taken (which always
		// fits: a decision never grows the inbox), so it waits with its
		// earlier fix and this answer names the new one; never a 500
		// with the entry held for good.
		if _, err := h.cfg.Inbox.Decide(ctx, e.Tenant, rs.id, inbox.Waiting, rs.by, h.clock.Now()); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		h.cfg.Logger.WarnContext(ctx, "api: inbox full; a resubmission refused again is handed back unchanged", slog.String("run_id", se.RecordID))
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, err
	}
	st, hd, body := se.Envelope()
	return events.APIGatewayV2HTTPResponse{StatusCode: st, Headers: hd, Body: string(body)}, nil
}

// listInbox serves GET /inbox: the caller's waiting writes, oldest first,
// as {"entries": [...]} (an entry a resubmission holds is still listed).
func (h *Handler) listInbox(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	if c.ev.RequestContext.HTTP.Method == http.MethodHead {
		// Every caller has an inbox (an empty list at worst): a HEAD's
		// status and header fields are GET's without reading the item,
		// up to 400 KB read consistently for content a HEAD never
		// carries (RED_TEAM 493).
		return jsonResp(http.StatusOK, struct{}{})
	}
	all, err := h.cfg.Inbox.List(ctx, c.tenant)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	caller := h.callerOf(c.ev)
	es := make([]inbox.Entry, 0, len(all))
	for _, e := range all {
		if e.Caller == caller {
			es = append(es, e)
		}
	}
	return jsonResp(http.StatusOK, map[string]any{"entries": es})
}

// defaultInbox is Config.Inbox's default: the RunsTable inbox beside a
// *runs.DynamoRuns, else an in-memory one.
func defaultInbox(rs runs.RunStore) (inbox.Store, error) {
	if d, ok := rs.(*runs.DynamoRuns); ok {
		return inbox.NewDynamo(inbox.DynamoConfig{Client: d.Client, Table: d.Table})
	}
	return inbox.NewMem(inbox.Config{}), nil
}

// decisionBy names the request's decision on an inbox entry (its Layer-1
// record's, inbox.DecisionBy).
func decisionBy(ctx context.Context) string {
	claim, claimed := idem.FromContext(ctx)
	return inbox.DecisionBy(claim, claimed)
}

// lostDecision answers a decision that lost the entry to another: 409
// CodeInboxEntryDecided naming what holds or decided it (discarded,
// resubmitting, resubmitted), whatever decided it.
func lostDecision(e inbox.Entry) events.APIGatewayV2HTTPResponse {
	return errResp(apierr.New(http.StatusConflict, CodeInboxEntryDecided, "the waiting write was already decided by another request: it is %s", e.State).
		WithDetails(map[string]any{"id": e.ID, "state": string(e.State)}))
}

// resubmitInboxEntry serves POST /inbox/{id}/resubmit under its own key:
// the waiting write runs again, decided against the request's
// Idempotency-Decided-Version or, without one, the version its refusal
// named, with the reason the refused write gave (kept on the entry; and a
// pause with its drain policy): a cancel, a pause or a resume. The
// resubmission first takes the entry (compare-and-set: waiting
// to resubmitting); when the check passes the write runs (its own answer is
// the response) and the entry leaves the inbox (resubmitted); when the
// record changed again in what the write decides on, the entry is handed
// back (waiting, updated) and the answer is the 409 with the new fix.
func (h *Handler) resubmitInboxEntry(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	caller := h.callerOf(c.ev)
	e, err := h.cfg.Inbox.Get(ctx, c.tenant, c.entryID())
	if errors.Is(err, inbox.ErrNotFound) || err == nil && e.Caller != caller {
		return notFound(), nil
	}
	if e.State == inbox.Discarded {
		// Decided by a discard: the write never runs (a retry of this very
		// resubmission is answered by Layer 1 from its record).
		return lostDecision(e), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	d, err := decidedVersion(c.ev)
	if err != nil {
		return decidedInvalid(err), nil
	}
	if !d.checked() {
		d = decision{version: e.CurrentVersion, from: decidedByEntry}
	}
	if !h.runsInboxOp(e.Operation) {
		return errResp(apierr.New(http.StatusConflict, CodeInboxOperationUnknown, "this host cannot run the waiting write's operation %q", e.Operation)), nil
	}
	by := decisionBy(ctx)
	// A retry of this very resubmission (its first answer lost): the take
	// may have landed, and the write with it.
	retry := e.By == by
	if e, err = h.cfg.Inbox.Decide(ctx, c.tenant, e.ID, inbox.Resubmitting, by, h.clock.Now()); err != nil {
		var de *inbox.DecidedError
		if errors.As(err, &de) {
			return lostDecision(de.Entry), nil
		}
		if errors.Is(err, inbox.ErrNotFound) {
			return notFound(), nil
		}
		return events.APIGatewayV2HTTPResponse{}, err
	}
	resp, done, err := h.ranBefore(ctx, c.tenant, e, retry)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if !done {
		var stale bool
		// The write runs as it was sent: with the reason its request gave
		// (and a pause with its drain policy).
		rs := resubmission{id: e.ID, by: by}
		switch e.Operation {
		case OpPauseRun:
			resp, stale, err = h.pause(ctx, c.tenant, caller, e.RecordID, e.DrainPolicy, e.Reason, d, rs)
		case OpResumeRun:
			resp, stale, err = h.resume(ctx, c.tenant, caller, e.RecordID, e.Reason, d, rs)
		default:
			resp, stale, err = h.cancel(ctx, c.tenant, caller, e.RecordID, e.Reason, d, rs)
		}
		if err != nil || stale {
			// Refused again: handed back (cancel kept it waiting), or left
			// held for this resubmission's retry.
			return resp, err
		}
	}
	if resp.StatusCode < 400 || resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusNotFound {
		// Decided again and run (or moot: the run ended or is gone).
		if _, err := h.cfg.Inbox.Decide(ctx, c.tenant, e.ID, inbox.Resubmitted, by, h.clock.Now()); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		return resp, nil
	}
	// Refused for this request's own fault (a decided version the run
	// never had): nothing ran; the entry waits again, as it was.
	if _, err := h.cfg.Inbox.Decide(ctx, c.tenant, e.ID, inbox.Waiting, by, h.clock.Now()); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return resp, nil
}

// runsInboxOp reports whether this host runs an inbox entry's operation:
// cancelRun always, pauseRun and resumeRun when its run store pauses
// runs.
func (h *Handler) runsInboxOp(op string) bool {
	switch op {
	case OpCancelRun:
		return true
	case OpPauseRun, OpResumeRun:
		return h.pauseStore() != nil
	}
	return false
}

// ranBefore answers (done) a retried resubmission whose write may already
// have run: once its entry is resubmitted, or (a cancel) while it still
// holds the entry and the run is cancelled (its write landed and the
// finish did not, or another request cancelled the run first), the answer
// is the run's as the write left it. 200 cancelled (202 paused, 202
// running) only when the run's CancelledBy (PausedBy, ResumedBy) is this
// resubmission's own write (cancelBy: its Layer-1 record, which its write
// recorded in the same conditional write as the status); 409 run_terminal
// when the run ended otherwise (a cancel's write never moved it: a cancel
// moves only a live or paused run); 404 when it is gone. A resubmitted
// entry's write never runs again. A first resubmission is never done
// here: its write runs and is checked. A retried pause or resume still
// holding its entry is not done here either: its store finds its own
// write (runs.PauseStore).
func (h *Handler) ranBefore(ctx context.Context, tenant string, e inbox.Entry, retry bool) (events.APIGatewayV2HTTPResponse, bool, error) {
	if !retry && e.State != inbox.Resubmitted || e.Operation != OpCancelRun && e.State != inbox.Resubmitted {
		return events.APIGatewayV2HTTPResponse{}, false, nil
	}
	r, err := h.cfg.Runs.Get(ctx, e.RecordID)
	by := cancelBy(ctx)
	switch {
	case errors.Is(err, runs.ErrRunNotFound) || err == nil && r.Tenant != tenant:
		return notFound(), true, nil
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, true, err
	case e.Operation == OpPauseRun && by != "" && r.PausedBy == by:
		resp, err := pausedResp(r.ID, r)
		return resp, true, err
	case e.Operation == OpResumeRun && by != "" && r.ResumedBy == by:
		resp, err := resumedResp(r.ID, r)
		return resp, true, err
	case e.Operation == OpCancelRun && cancelledBy(r, by):
		resp, _, err := cancelled(r.ID)
		return resp, true, err
	case r.Status != runs.StatusCancelled && e.State != inbox.Resubmitted:
		return events.APIGatewayV2HTTPResponse{}, false, nil
	case r.Status.Terminal():
		// Cancelled by another request, or ended otherwise: never an
		// answer claiming a write this resubmission did not make.
		return errResp(apierr.New(http.StatusConflict, apierr.CodeRunTerminal, "the run already ended (%s)", r.Status)), true, nil
	}
	return lostDecision(e), true, nil
}

// CodeInboxOperationUnknown is the vendor error code (HTTP 409) of a
// resubmitted write whose operation this host does not run.
const CodeInboxOperationUnknown = "idemkit.inbox_operation_unknown"

// CodeInboxEntryDecided is the vendor error code (HTTP 409) of a discard or
// resubmission of an inbox entry that another request already decided:
// details {id, state}, state "discarded" (dropped, its write never runs),
// "resubmitting" (another resubmission holds it while its write runs) or
// "resubmitted" (its write was run).
const CodeInboxEntryDecided = "idemkit.inbox_entry_decided"

// discardInboxEntry serves POST /inbox/{id}/discard under its own key: the
// waiting write is dropped, never run (compare-and-set: waiting to
// discarded); 200 {"id", "status": "discarded"}, also to a retry of the
// same discard; 404 when the caller's inbox has no such entry; 409
// CodeInboxEntryDecided when another discard dropped it or a resubmission
// holds or ran it.
func (h *Handler) discardInboxEntry(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	if caller := h.callerOf(c.ev); caller != "" {
		// Only the caller that queued the write finds it (one more read,
		// under a policy whose caller is more than the tenant).
		e, err := h.cfg.Inbox.Get(ctx, c.tenant, c.entryID())
		if errors.Is(err, inbox.ErrNotFound) || err == nil && e.Caller != caller {
			return notFound(), nil
		}
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	_, err := h.cfg.Inbox.Decide(ctx, c.tenant, c.entryID(), inbox.Discarded, decisionBy(ctx), h.clock.Now())
	var de *inbox.DecidedError
	switch {
	case errors.As(err, &de):
		return lostDecision(de.Entry), nil
	case errors.Is(err, inbox.ErrNotFound):
		return notFound(), nil
	case err != nil:
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return jsonResp(http.StatusOK, map[string]any{"id": c.entryID(), "status": "discarded"})
}
