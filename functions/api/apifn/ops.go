package apifn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// createRun runs under the Layer-1 claim. A run is written only for a 201:
// validation errors and conformance-unavailable's 503 create nothing.
func (h *Handler) createRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	ev, tenant := c.ev, c.tenant
	body := c.create
	if body == nil {
		var e *apierr.Error
		if body, e = h.readCreate(ev); e != nil {
			return errResp(e), nil
		}
	}
	req, scope := body.req, body.scope
	if h.cfg.Test.Hold != nil {
		if err := h.cfg.Test.Hold(ctx, tenant, header.First(ev.Headers, idem.HeaderKey)); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	switch req.WorkflowID {
	case webhook.WorkflowUnavailable:
		r := errResp(apierr.New(http.StatusServiceUnavailable, webhook.CodeRunnerUnavailable, "the conformance-unavailable workflow never has a runner"))
		r.Headers["Retry-After"] = "1"
		return r, nil
	case webhook.WorkflowDelay:
		if err := h.clock.Sleep(ctx, time.Duration(req.DelayMs)*time.Millisecond); err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	// NewRun stamps the run with the kit's current recipes (recipe stamps):
	// its effects are identified under these stamps for its whole life.
	run := runs.NewRun(tenant, req.WorkflowID, req.Inputs, h.clock.Now())
	// The body's RunOptions, persisted on the run at creation and never
	// changed after it.
	run.Options = req.Options
	// Every execution of this idempotency record names the same run
	// (createClaimedRun). Under `OpenWOP-Dedup: enforce` with a scopeId
	// the run holds the tenant's scope while it is live: a create while
	// another live run holds it is 409 run_already_active (dedup.go),
	// also when it is found only by the completion transaction holding
	// the run's write (scopeHeldAnswer).
	if scope != "" {
		_ = idem.OnConflict(ctx, scopeHeldAnswer) // ErrNoClaim: nothing to answer
	}
	claim, existed, err := h.createClaimedRun(ctx, &run, scope, func(prev runs.Run) bool {
		return prev.Tenant == tenant && prev.WorkflowID == run.WorkflowID
	})
	if errors.Is(err, runs.ErrScopeHeld) {
		return scopeHeldResp(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if existed {
		h.cfg.Logger.InfoContext(ctx, "api: run created by an earlier execution of this request", slog.String("run_id", run.ID),
			slog.Int("attempt", claim.Attempt))
	}
	resp, err := jsonResp(http.StatusCreated, h.runAction(ev, run))
	if err == nil {
		resp.Headers["Location"] = h.baseURL(ev) + "/runs/" + runs.ProjectID(run.ID)
	}
	return resp, err
}

// createBody is createRun's body as read (readCreate): the request and
// its dedup scope ("" for none).
type createBody struct {
	req   webhook.CreateRequest
	scope string
}

// readCreate reads createRun's body: ParseCreate, a seams-only workflow
// refused on a host without the seams, and the dedup scope.
func (h *Handler) readCreate(ev events.APIGatewayV2HTTPRequest) (*createBody, *apierr.Error) {
	body, e := eventBody(ev)
	if e != nil {
		return nil, e
	}
	req, e := webhook.ParseCreate(body, &h.cfg.Webhook)
	if e == nil && webhook.SeamWorkflow(req.WorkflowID) && !h.cfg.Test.ConformanceSeams {
		// A seams-only fixture is unknown to a host without the seams.
		e = apierr.New(http.StatusBadRequest, apierr.CodeValidation, "unknown workflowId; built-in workflows: %s",
			strings.Join(webhook.Workflows, ", ")).WithDetails(map[string]any{"field": "workflowId"})
	}
	var scope string
	if e == nil {
		scope, e = dedupScope(ev, req)
	}
	if e != nil {
		return nil, e
	}
	return &createBody{req: req, scope: scope}, nil
}

// precheckCreate is createRun's Route.precheck: its body read before
// the claim (readCreate), kept for createRun.
func (h *Handler) precheckCreate(c *call) *apierr.Error {
	b, e := h.readCreate(c.ev)
	c.create = b
	return e
}

// cancelRun runs under the Layer-1 claim (scoped to the route, the run id
// in the request fingerprint). A
// request with Idempotency-Decided-Version is an offline-decided cancel,
// checked against the run's changes since that version (inbox.go).
func (h *Handler) cancelRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	d, err := decidedVersion(c.ev)
	if err != nil {
		return decidedInvalid(err), nil
	}
	resp, _, err := h.cancel(ctx, c.tenant, h.callerOf(c.ev), c.runID(), cancelReason(c.ev), d, resubmission{})
	return resp, err
}

// getRun returns the run's snapshot with its strong ETag, or 304 with no
// body when If-None-Match matches it (notModified). The tag is the run's
// version and a digest of the snapshot ("7.Xy…", snapshotETag): it changes
// whenever the snapshot does, also on progress that moves no tracked field
// (a heartbeat's updatedAt, a retry linked), and a write sends it back as
// If-Match for the version it begins with (decided.Parse).
func (h *Handler) getRun(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	r, err := h.cfg.Runs.Get(ctx, c.runID())
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != c.tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	b, err := snapshotJSON(h.snapshot(c.ev, r))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	etag := snapshotETag(r.Version, b)
	if notModified(c.ev.Headers, etag) {
		return notModifiedResp(etag, varyRun), nil
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(b),
		Headers: map[string]string{"Content-Type": "application/json", "ETag": etag, "Vary": varyRun}}, nil
}

// ExtensionRun is the key of the host's own snapshot state under
// RunSnapshot.extensions (the schema's `<org>.<name>` seat): createdAt,
// updatedAt, effectsUrl (not with Layer 1 off), the recipe stamps
// activityIdentityRecipe and semanticRequestRecipe (recipe stamps) the
// run's effects are identified
// with; for a run with transient failures, failures and lastError (named
// recoveredFailures and lastRecoveredError once the run completed); and, for
// a parked run, retry: nextAttemptAt, attempt, maxAttempts and budgetEndsAt
// of the effect it waits for; version, the run's version (the strong ETag
// of GET /runs/{runId} begins with it); for a retry, on and its alias retryOf,
// the failed run it retries; and for a retried failed run, retries, the
// runs started from it (sorted ids).
const ExtensionRun = "idemkit.run"

// EventLogSchemaVersion is RunSnapshot.eventLogSchemaVersion: the event-log
// era a v2 host writes (3).
const EventLogSchemaVersion = 3

// snapshot is the run snapshot served by getRun (and by the values mode of
// the events stream): run-snapshot.schema.json, which is closed, so
// everything the schema has no field for lives under
// extensions["idemkit.run"]. It never carries the run's inputs. The owner
// is the run's tenant and the subject its API key authenticates
// (apikeys.OwnerSubject). startedAt is the time createRun accepted the run;
// completedAt, on a terminal run only, the time of its terminal event
// (endedAt: its terminal transition, or the event before it when the
// clocks that stamped them disagree).
// A failed run carries error {code, message}: code run_timeout or
// loop_limit_exceeded when a breached cap of its configurable ended it,
// else idemkit.run_failed. A run
// created with RunOptions carries each of configurable, tags and metadata
// it was given, the JSON value as persisted (runs.Options); a run created
// without one has no such field.
func (h *Handler) snapshot(ev events.APIGatewayV2HTTPRequest, r runs.Run) map[string]any {
	ext := map[string]any{
		"createdAt": r.CreatedAt.Format(time.RFC3339Nano), "updatedAt": r.UpdatedAt.Format(time.RFC3339Nano),
		// The recipe stamps its effects are identified with.
		"activityIdentityRecipe": r.ActivityIdentityRecipe, "semanticRequestRecipe": r.SemanticRequestRecipe,
	}
	if !h.guard.Disabled {
		// With Layer 1 off getRunEffects answers 404 (gatedOnIdempotency):
		// nothing links to it.
		ext["effectsUrl"] = h.baseURL(ev) + "/runs/" + runs.ProjectID(r.ID) + "/effects"
	}
	switch {
	case r.Failures > 0 && r.Status == runs.StatusCompleted:
		// A completed run never reads as failed: executions that failed
		// transiently before it completed are named as recovered.
		ext["recoveredFailures"], ext["lastRecoveredError"] = r.Failures, r.LastError
	case r.Failures > 0:
		// Executions left to the stream's retries, and the latest reason:
		// a run retried toward its last try is visible while "running".
		ext["failures"], ext["lastError"] = r.Failures, r.LastError
	}
	// The version a client decides an offline write against (the ETag of
	// GET /runs/{runId}, If-Match or Idempotency-Decided-Version).
	ext["version"] = r.Version
	if r.RetryOf != "" {
		// A retry is linked to the failed run it retries by on (alias
		// retryOf), on every read.
		ext[MemberOn], ext[MemberRetryOf] = r.RetryOf, r.RetryOf
	}
	if len(r.Retries) > 0 {
		// A failed run lists the runs Action.retry started from it.
		ext[MemberRetries] = r.Retries
	}
	if !r.Wake.IsZero() && !r.Status.Terminal() {
		// Parked: its effect's next attempt is scheduled (a provider's
		// Retry-After, a backoff), attempt n of N, within a time budget.
		rt := map[string]any{"nextAttemptAt": r.Wake.At.UTC().Format(time.RFC3339Nano),
			"attempt": r.Wake.Attempt, "maxAttempts": r.Wake.MaxAttempts}
		if !r.Wake.Deadline.IsZero() {
			rt["budgetEndsAt"] = r.Wake.Deadline.UTC().Format(time.RFC3339Nano)
		}
		ext["retry"] = rt
	}
	snap := map[string]any{
		"runId": r.ID, "workflowId": r.WorkflowID, "status": r.Status,
		"eventLogSchemaVersion": EventLogSchemaVersion,
		"owner":                 runOwner(r),
		"startedAt":             r.CreatedAt.UTC().Format(time.RFC3339Nano),
		"extensions":            map[string]any{ExtensionRun: ext},
	}
	if r.Status.Terminal() {
		// The terminal event's time (endedAt), not the end's own stamp:
		// the two differ when the clock that ended the run is behind the
		// one that stamped the event before.
		snap["completedAt"] = endedAt(r).UTC().Format(time.RFC3339Nano)
	}
	if r.Status == runs.StatusFailed {
		snap["error"] = map[string]any{"code": failureCode(r), "message": failureMessage(r)}
	}
	for name, v := range map[string]json.RawMessage{"configurable": r.Options.Configurable, "tags": r.Options.Tags, "metadata": r.Options.Metadata} {
		if v != nil {
			snap[name] = v
		}
	}
	return snap
}

// snapshotJSON encodes a run snapshot without escaping <, > and & in
// strings, so that the RunOptions it carries surface as persisted, byte for
// byte.
func snapshotJSON(snap map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(snap); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// failureCode is a failed run's error code: the registry code it ended
// with (run_timeout, loop_limit_exceeded: runs.Run.ErrorCode), else the
// host's own CodeRunFailed.
func failureCode(r runs.Run) string {
	if r.ErrorCode != "" {
		return r.ErrorCode
	}
	return CodeRunFailed
}

// failureMessage is a failed run's recorded error, or a generic one.
func failureMessage(r runs.Run) string {
	if r.Error != "" {
		return r.Error
	}
	return "the run failed"
}

// effects serves the Layer-2 witness (effect-ledger-projection.schema.json).
func (h *Handler) effects(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	runID, tenant := c.runID(), c.tenant
	r, err := h.cfg.Runs.Get(ctx, runID)
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	if c.ev.RequestContext.HTTP.Method == http.MethodHead {
		// The projection is content, which a HEAD never carries: its
		// Query and its reads of each record answered nothing (RED_TEAM
		// 493). The status and header fields are GET's.
		return jsonResp(http.StatusOK, struct{}{})
	}
	p, err := h.cfg.Ledger.Witness(ctx, runID)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return jsonResp(http.StatusOK, p)
}

// runOwner is the run's owner block, as RunSnapshot.owner carries it and
// run.started echoes it.
func runOwner(r runs.Run) map[string]any {
	return map[string]any{"tenant": r.Tenant, "subject": apikeys.OwnerSubject(r.Tenant)}
}
