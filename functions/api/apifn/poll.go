package apifn

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
)

// pollEvents serves GET /runs/{runId}/events/poll (pollRunEvents): the
// run's events with sequence > afterSequence (all when absent), as one JSON
// answer {runId, events, lastSequence, status, isTerminal}. It answers at
// once with what the run record holds (timeout is validated, 1..60, and
// the client polls again for later events), so a Lambda invocation never
// waits. streamMode is accepted, and refused, as on streamRunEvents (400
// unsupported_stream_mode with details.supported) and does not filter:
// every recorded event is a debug-mode event.
func (h *Handler) pollEvents(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	params, err := queryParams(c.ev)
	if err != nil {
		return errResp(apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the query string is malformed")), nil
	}
	after := int64(-1)
	if vs, ok := params["afterSequence"]; ok {
		n, ok := parseCursor(vs[0])
		if len(vs) != 1 || !ok {
			return errResp(validation("afterSequence", "afterSequence must be a non-negative integer")), nil
		}
		after = n
	}
	if vs, ok := params["timeout"]; ok {
		n, err := strconv.Atoi(vs[0])
		if len(vs) != 1 || err != nil || n < 1 || n > 60 {
			return errResp(validation("timeout", "timeout must be an integer 1..60 (seconds)")), nil
		}
	}
	if vs, ok := params["streamMode"]; ok {
		if _, ok := parseModes(vs); !ok {
			return errResp(unsupportedStreamMode()), nil
		}
	}
	r, err := h.cfg.Runs.Get(ctx, c.runID())
	if errors.Is(err, runs.ErrRunNotFound) || (err == nil && r.Tenant != c.tenant) {
		return notFound(), nil
	}
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	all := RunEvents(r)
	evs := []RunEvent{}
	for _, e := range all {
		if e.Sequence > after {
			evs = append(evs, e)
		}
	}
	return jsonResp(http.StatusOK, map[string]any{"runId": r.ID, "events": evs, "lastSequence": all[len(all)-1].Sequence,
		"status": r.Status, "isTerminal": r.Status.Terminal()})
}

// effectSeams serves GET /host/effect-seams (getEffectSeamManifest): the
// host's effect-seam manifest (settings.EffectSeamManifest).
func (h *Handler) effectSeams(_ context.Context, _ call) (events.APIGatewayV2HTTPResponse, error) {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(h.seams),
		Headers: map[string]string{"Content-Type": "application/json"}}, nil
}
