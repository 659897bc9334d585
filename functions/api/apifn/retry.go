package apifn

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
)

// CodeRunNotFailed is the vendor error code (HTTP 409) of a retry of a run
// that has not failed: only a failed run is retried (the OpenWOP registry
// has no row for it).
const CodeRunNotFailed = "idemkit.run_not_failed"

// CodeRetryLimitReached is the vendor error code (HTTP 409) of a retry of
// a failed run already retried MaxRunRetries times (the OpenWOP registry
// has no row for it); details {limit, retries}.
const CodeRetryLimitReached = "idemkit.retry_limit_reached"

// MaxRunRetries is how many times one failed run can be retried. The
// failed run's item lists its retries (runs.Run.Retries), and DynamoDB
// refuses an item past 400 KB: the largest run the host accepts (about
// 266,000 bytes) of the longest tenant with this many retries listed is
// an item of about 279,000 bytes. A retry that fails is itself a failed
// run, retried under its own cap.
const MaxRunRetries = runs.MaxRetries

// retryRun serves POST /runs/{runId}/retry under the Layer-1 claim of the
// retry request's own key: a new pending run of the failed run's workflow,
// inputs and run options, linked to it by on (and its alias retryOf),
// answered 201 as createRun's (runAction). A failed action's key replays
// its failure; this is how the work runs again. The retry of a replay fork
// is a replay fork of the same source, from the same point
// (runs.NewRetry): its effects are resolved from the source's record,
// never performed, as the fork's were (RED_TEAM 442); the retry of a
// branch fork is a branch of the same source from the same point, which
// performs none of the branch's fixed history (RED_TEAM 471). A replay
// fork's retry past the fork retention of its source's records is refused
// as a fresh replay fork from that point is, 422 fork_point_invalid with
// details {sourceRunId, fromSeq, boundary}, nothing created (RED_TEAM
// 510); a branch's, and a plain run's, are not bounded by it. Every execution of one retry key names the same new run
// (runs.ClaimRunID), so a reclaimed retry never creates a second one. A run
// that is not failed is 409 CodeRunNotFailed; another tenant's, 404. A
// failed run that lists MaxRunRetries retries is 409 CodeRetryLimitReached,
// decided on the run as read, before anything is written; the retry key's
// own run, already listed or written by an earlier execution of it, is
// still answered (and listed). Racing retries that all read the run below
// the cap are decided by the write that lists each (runs.RunStore.Create,
// conditional on the list's size): one listed past the cap is refused the
// same 409 and no run of it is written, whether the listing precedes the
// run's own write (refused by Create) or commits with it in the
// completion transaction (refused at commit, answered through
// idem.OnConflict).
func (h *Handler) retryRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	prev, err := h.cfg.Runs.Get(ctx, c.runID())
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && prev.Tenant != c.tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if prev.Status != runs.StatusFailed {
		return errResp(apierr.New(http.StatusConflict, CodeRunNotFailed, "only a failed run is retried; this one is %s", prev.Status)), nil
	}
	// A run at this request's run id is its own when it retries prev and
	// is not one an earlier version wrote and cancelled when its listing
	// was refused at the cap (that execution was answered the 409).
	ours := func(got runs.Run) bool {
		return got.Tenant == c.tenant && got.RetryOf == prev.ID && !runs.CancelledAtCap(got)
	}
	// A replay fork's retry is a replay fork of its source from the same
	// point, resolving its executions from the same records: past the
	// fork retention it is refused as a fresh one would be (RED_TEAM 470,
	// 510), unless an earlier execution of this key listed or wrote its
	// run inside it (that run is answered, as forkRun answers its own).
	if prev.IsReplay() {
		retention := h.forkRetention()
		since, ok := prev.SourceRecordsSince()
		if !ok {
			since = prev.RecordsSince() // a fork whose ancestry kept no times: its own bound
		}
		if boundary := since.Add(retention); h.clock.Now().After(boundary) && !h.listedEarlier(ctx, c.tenant, prev) {
			earlier, err := h.writtenEarlier(ctx, c.tenant, ours)
			if err != nil {
				return events.APIGatewayV2HTTPResponse{}, err
			}
			if !earlier {
				return pastRetentionResp(prev.Fork.SourceRunID, prev.Fork.FromSeq, retention, boundary), nil
			}
		}
	}
	written := false
	if len(prev.Retries) >= MaxRunRetries && !h.listedEarlier(ctx, c.tenant, prev) {
		mine, err := h.writtenEarlier(ctx, c.tenant, ours)
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		if !mine {
			return retryLimitResp(len(prev.Retries)), nil
		}
		written = true
	}
	// A fork's retry is a fork of the same source, from the same point,
	// in the same mode (runs.NewRetry, RED_TEAM 442, 471): a replay's
	// performs nothing, a branch's only what the branch re-fired.
	run := runs.NewRetry(prev, h.clock.Now())
	if written {
		// Written unlisted by an earlier execution under an earlier
		// version (which wrote a retry's run before its listing): the
		// run passed the cap then, and is listed now past it (LinkRetry
		// is not capped), never refused while it exists.
		claim, _ := idem.FromContext(ctx)
		run.ID = runs.ClaimRunID(c.tenant, claim.ID, claim.OriginalRequestID)
		if err := h.cfg.Runs.LinkRetry(ctx, prev.ID, run.ID); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	} else {
		_ = idem.OnConflict(ctx, retryLimitAnswer) // ErrNoClaim: nothing to answer
		if _, _, err := h.createClaimedRun(ctx, &run, "", ours); err != nil {
			var limit *runs.RetryLimitError
			if errors.As(err, &limit) {
				return retryLimitResp(limit.Retries), nil
			}
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	resp, err := jsonResp(http.StatusCreated, h.runAction(c.ev, run))
	if err == nil {
		resp.Headers["Location"] = h.baseURL(c.ev) + "/runs/" + runs.ProjectID(run.ID)
	}
	return resp, err
}

// listedEarlier reports whether this request is a re-execution of a
// Layer-1 record whose earlier execution already listed its run (the id
// createClaimedRun gives it) among failed's retries: without the
// completion transaction the listing precedes the run's write
// (runs.DynamoRuns.Create), so an execution that stopped between the two
// left its id listed and no run, and its re-execution passes the cap and
// writes the run. No read: failed as read names the id or not.
func (h *Handler) listedEarlier(ctx context.Context, tenant string, failed runs.Run) bool {
	claim, ok := idem.FromContext(ctx)
	if !ok || claim.OriginalRequestID == "" || (claim.Attempt <= 1 && !claim.Reclaimed) {
		return false
	}
	return slices.Contains(failed.Retries, runs.ClaimRunID(tenant, claim.ID, claim.OriginalRequestID))
}

// retryLimitResp is the 409 CodeRetryLimitReached of a retry of a failed
// run that lists retries retries.
func retryLimitResp(retries int) events.APIGatewayV2HTTPResponse {
	return errResp(apierr.New(http.StatusConflict, CodeRetryLimitReached,
		"this run has been retried %d times, the most a failed run is; retry the latest of its retries once it has failed", retries).
		WithDetails(map[string]any{"limit": MaxRunRetries, "retries": retries}))
}

// retryLimitAnswer is retryRun's answer (idem.OnConflict) to the cause of
// a completion transaction cancelled by its retry's listing: where the
// run commits with the completion (runs.DynamoRuns.Transactional), a
// racing retry may fill the failed run's list after the cap was checked,
// and the listing then cancels the transaction with a
// *runs.RetryLimitError. The answer is retryLimitResp, recorded as the
// refusal before any write is. Nil for any other cause.
func retryLimitAnswer(cause error) *idem.Response {
	var limit *runs.RetryLimitError
	if !errors.As(cause, &limit) {
		return nil
	}
	return conflictAnswer(retryLimitResp(limit.Retries))
}
