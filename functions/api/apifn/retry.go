package apifn

import (
	"context"
	"errors"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// CodeRunNotFailed is the vendor error code (HTTP 409) of a retry of a run
// that has not failed: only a failed run is retried (the OpenWOP registry
// has no row for it).
const CodeRunNotFailed = "idemkit.run_not_failed"

// retryRun serves POST /runs/{runId}/retry under the Layer-1 claim of the
// retry request's own key: a new pending run of the failed run's workflow
// and inputs, linked to it by on (and its alias retryOf), answered 201 as
// createRun's (runAction). A failed action's key replays its failure; this is how the
// work runs again. Every execution of one retry key names the same new run
// (runs.ClaimRunID), so a reclaimed retry never creates a second one. A run
// that is not failed is 409 CodeRunNotFailed; another tenant's, 404.
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
	run := runs.NewRun(c.tenant, prev.WorkflowID, prev.Inputs, h.clock.Now())
	run.RetryOf = prev.ID
	run.Options = prev.Options // the same request's RunOptions
	if _, _, err := h.createClaimedRun(ctx, &run, "", func(got runs.Run) bool {
		return got.Tenant == c.tenant && got.RetryOf == prev.ID
	}); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	resp, err := jsonResp(http.StatusCreated, h.runAction(c.ev, run))
	if err == nil {
		resp.Headers["Location"] = h.baseURL(c.ev) + "/runs/" + runs.ProjectID(run.ID)
	}
	return resp, err
}
