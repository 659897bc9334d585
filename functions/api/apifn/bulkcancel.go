package apifn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// Bulk cancel (bulkCancelRuns, POST /runs:bulk-cancel; runs.md §Bulk
// cancel). The body is the operation's closed schema, {runIds, reason?}:
// 1 to maxBulkRunIds ids, each a tenant-bound runId as the id schema
// writes it (`<tenant>/<opaque>`, never a path projection), and a reason
// of at most maxBulkReason characters. Anything else is refused 400
// validation_error before Layer 1 reads the request (so a refusal is never
// a key's answer): over the cap with details.maxRunIds, an id outside the
// runId grammar with details.field naming its index ("runIds[2]").
//
// Each id is then answered as POST /runs/{runId}/cancel would answer it
// under the same key, in one entry of the 200's results, in request order,
// whatever each entry says: ok with status cancelled, or ok false with the
// single cancel's error envelope (run_terminal for a run that already
// ended, not_found for no run of the caller's). An id of another tenant is
// id_tenant_mismatch in its entry, refused before any read, never a
// top-level 403. An id sent more than once is cancelled once, and every
// position carrying it gets that one answer. The request runs under Layer
// 1 as one request: its Idempotency-Key replays the whole answer, and each
// run it cancels records the key's record as its CancelledBy, so a retry
// whose first answer was lost answers ok for the runs its first attempt
// cancelled (the single cancel's keyed semantics). A store out of reach
// for one id (throttled past the SDK's retries, a 5xx, no answer) fails a
// keyed request whole, as a single cancel's: 503 idemkit.store_unavailable
// with Retry-After (any other error of one id, the single cancel's 500),
// nothing recorded under its key, whose retry then answers ok for the
// runs this attempt cancelled; a 5xx is never a key's stored answer. A
// request without a key (nothing is recorded) answers that entry with the
// single cancel's 503 envelope, idemkit.store_unavailable (internal_error
// for another error), and the others as they went. The request's own
// deadline passing, or its client hanging up, fails the whole request as
// the single cancel's would (nothing is recorded under its key). Ids are cancelled bulkCancelConcurrency at a time, each with
// the single cancel's round trips (one conditional UpdateItem for a live
// run). The Idempotency-Decided-Version and If-Match of an offline-decided
// cancel name one run's version, and are not read here.

// maxBulkRunIds is the most ids of one bulk cancel (the operation's
// maxItems, the cap runs.md recommends).
const maxBulkRunIds = 100

// maxBulkReason is the most characters of a bulk cancel's reason (the
// operation's maxLength).
const maxBulkReason = 512

// bulkCancelConcurrency is how many ids of one bulk cancel are cancelled
// at once.
const bulkCancelConcurrency = 8

// bulkCancelBody is a bulk cancel's body as checkBulkCancelBody accepted
// it.
type bulkCancelBody struct {
	runIDs []string
	reason string
}

// checkBulkCancelBody holds bulkCancelRuns's body to the operation's
// schema before anything runs (parseBulkCancel).
func checkBulkCancelBody(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	_, e := parseBulkCancel(ev)
	return e
}

// parseBulkCancel reads a bulk cancel's body: at most MaxBodyBytes of a
// JSON media type (checkBody), a JSON object with runIds, an array of 1 to
// maxBulkRunIds runIds, and an optional string reason of at most
// maxBulkReason characters, and no other member.
func parseBulkCancel(ev events.APIGatewayV2HTTPRequest) (bulkCancelBody, *apierr.Error) {
	if e := checkBody(ev); e != nil {
		return bulkCancelBody{}, e
	}
	body, e := eventBody(ev)
	if e != nil {
		return bulkCancelBody{}, e
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return bulkCancelBody{}, validation("runIds", "the body is required: a JSON object {runIds, reason?}")
	}
	if !json.Valid(body) {
		return bulkCancelBody{}, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "The request body is not valid JSON.")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return bulkCancelBody{}, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object {runIds, reason?}")
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name != "runIds" && name != "reason" {
			return bulkCancelBody{}, validation(name, fmt.Sprintf("%q is not a member of the body, which is closed: {runIds, reason?}", name))
		}
	}
	var out bulkCancelBody
	if raw, ok := m["reason"]; ok {
		var s *string
		if json.Unmarshal(raw, &s) != nil || s == nil {
			return bulkCancelBody{}, validation("reason", "reason must be a string")
		}
		if utf8.RuneCountInString(*s) > maxBulkReason {
			return bulkCancelBody{}, validation("reason", fmt.Sprintf("reason is at most %d characters", maxBulkReason)).
				WithDetails(map[string]any{"field": "reason", "maxLength": maxBulkReason})
		}
		out.reason = *s
	}
	raw, ok := m["runIds"]
	var items []json.RawMessage
	if !ok {
		return bulkCancelBody{}, validation("runIds", "runIds is required: an array of 1 to 100 runIds")
	}
	if json.Unmarshal(raw, &items) != nil || items == nil { // given, but no array: not called missing (RED_TEAM 589)
		return bulkCancelBody{}, validation("runIds", "runIds must be an array of 1 to 100 runIds")
	}
	switch {
	case len(items) == 0:
		return bulkCancelBody{}, validation("runIds", "runIds names no run: send 1 to 100 runIds")
	case len(items) > maxBulkRunIds:
		return bulkCancelBody{}, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "runIds names %d runs; a bulk cancel takes at most %d", len(items), maxBulkRunIds).
			WithDetails(map[string]any{"field": "runIds", "maxRunIds": maxBulkRunIds})
	}
	out.runIDs = make([]string, len(items))
	for i, item := range items {
		field := fmt.Sprintf("runIds[%d]", i)
		var s *string
		if json.Unmarshal(item, &s) != nil || s == nil {
			return bulkCancelBody{}, validation(field, field+" must be a string")
		}
		if !runs.ValidRunID(*s) {
			return bulkCancelBody{}, validation(field, field+" is not a tenant-bound runId <tenantId>/<opaque>")
		}
		out.runIDs[i] = *s
	}
	return out, nil
}

// bulkCancelRuns serves POST /runs:bulk-cancel under the Layer-1 claim:
// each distinct id is cancelled as cancelRun would cancel it
// (bulkCancelOne), bulkCancelConcurrency at a time, and the answer is 200
// {results} in request order.
func (h *Handler) bulkCancelRuns(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	req, e := parseBulkCancel(c.ev)
	if e != nil {
		return errResp(e), nil
	}
	caller := h.callerOf(c.ev)
	at := make(map[string]int, len(req.runIDs))
	distinct := make([]string, 0, len(req.runIDs))
	for _, id := range req.runIDs {
		if _, seen := at[id]; !seen {
			at[id] = len(distinct)
			distinct = append(distinct, id)
		}
	}
	entries := make([]json.RawMessage, len(distinct))
	errs := make([]error, len(distinct))
	slots := make(chan struct{}, bulkCancelConcurrency)
	var wg sync.WaitGroup
	var panicked sync.Once
	var panicValue any
	for i, id := range distinct {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() {
				// A panic of one id's cancel is the request's, raised
				// again below on the request's goroutine, where the
				// Guard recovers it as it does a single cancel's (500,
				// nothing recorded under the key): unrecovered here it
				// would end the process (RED_TEAM 351).
				if p := recover(); p != nil {
					panicked.Do(func() {
						panicValue = p
						h.cfg.Logger.ErrorContext(ctx, "api: one id's cancel of a bulk cancel panicked", slog.String("stack", string(debug.Stack())),
							slog.String("request_id", c.ev.RequestContext.RequestID))
					})
				}
				<-slots
				wg.Done()
			}()
			entries[i], errs[i] = h.bulkCancelOne(ctx, c, caller, id, req.reason)
		}()
	}
	wg.Wait()
	if panicValue != nil {
		panic(panicValue)
	}
	if err := errors.Join(errs...); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	results := make([]json.RawMessage, len(req.runIDs))
	for i, id := range req.runIDs {
		results[i] = entries[at[id]]
	}
	return jsonResp(http.StatusOK, map[string]any{"results": results})
}

// bulkCancelOne is one id's entry of a bulk cancel: {runId, ok: true,
// status: cancelled}, or {runId, ok: false, error} with the envelope
// POST /runs/{runId}/cancel would answer. An error is returned only when
// the request itself is over (its context done): the whole request fails.
// A store error is logged as the single cancel's is (its error, keyed
// hashes only, and the request id), never the id, which is the body's.
func (h *Handler) bulkCancelOne(ctx context.Context, c call, caller, id, reason string) (json.RawMessage, error) {
	if runs.RunTenant(id) != c.tenant {
		return bulkEntry(id, apierr.New(http.StatusForbidden, apierr.CodeIDTenantMismatch, "the runId's tenant segment is not the caller's tenant").Body())
	}
	resp, _, err := h.cancel(ctx, c.tenant, caller, id, reason, decision{}, resubmission{})
	_, claimed := idem.FromContext(ctx)
	switch {
	case err != nil && (ctx.Err() != nil || claimed):
		// Under a Layer-1 claim an entry that failed for want of the
		// store (or with a 500) would be kept under the key, and its
		// retry would replay that failure instead of cancelling the run
		// (a 5xx is never a key's stored answer): the whole request
		// fails as the single cancel would, 503 for a store out of reach
		// (serve), nothing recorded, and the key's retry answers ok for
		// the runs this attempt cancelled (RED_TEAM 352).
		return nil, err
	case err != nil && storeDown(err):
		h.cfg.Logger.WarnContext(ctx, "api: a store is unavailable for one id of a bulk cancel", keyhash.ErrAttr(err),
			slog.String("request_id", c.ev.RequestContext.RequestID))
		return bulkEntry(id, apierr.New(http.StatusServiceUnavailable, idem.CodeStoreUnavailable,
			"A store is unavailable; this run may not be cancelled. Cancel it again.").Body())
	case err != nil:
		h.cfg.Logger.ErrorContext(ctx, "api: internal error for one id of a bulk cancel", keyhash.ErrAttr(err),
			slog.String("request_id", c.ev.RequestContext.RequestID))
		return bulkEntry(id, apierr.New(http.StatusInternalServerError, "internal_error", "internal error").Body())
	case resp.StatusCode == http.StatusOK:
		return json.Marshal(map[string]any{"runId": id, "ok": true, "status": runs.StatusCancelled})
	}
	return bulkEntry(id, []byte(resp.Body))
}

// bulkEntry is the entry of an id refused with the envelope env.
func bulkEntry(id string, env []byte) (json.RawMessage, error) {
	return json.Marshal(map[string]any{"runId": id, "ok": false, "error": json.RawMessage(env)})
}
