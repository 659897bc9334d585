package apifn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/canon"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// OpTestWorkOrder is the operation id of the ERP policy's public
// format-validation route, POST /api/v1/inbound/work-orders/test.
const OpTestWorkOrder = "testInboundWorkOrder"

// TestWorkOrderPath is the ERP policy's format-validation route: it needs
// no credential and no Idempotency-Key, never claims, replays or writes an
// idempotency record (the route is not Idempotent, so Layer 1 never sees
// it), and answers whether the body is a valid inbound work order.
const TestWorkOrderPath = "/api/v1/inbound/work-orders/test"

// testWorkOrder decodes, normalises and validates an inbound work order
// (JSON, or XML as application/xml or text/xml) and answers 200
// {"valid":true,"work_order_number","projects"} — rendered as XML when the
// Accept header prefers it — or the envelope: 400 validation_error (naming
// the field in details.field), 415 unsupported_media_type. It reads nothing
// and writes nothing.
func (h *Handler) testWorkOrder(_ context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	wo, e := decodeWorkOrder(c.ev, nil, false)
	if e != nil {
		return errResp(e), nil
	}
	b, err := json.Marshal(map[string]any{"valid": true, "work_order_number": wo.Number, "projects": len(wo.Projects)})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := workorder.Render(&idem.Response{Status: http.StatusOK, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: b},
		header.First(c.ev.Headers, "Accept"))
	return events.APIGatewayV2HTTPResponse{StatusCode: out.Status, Body: string(out.Body),
		Headers: map[string]string{"Content-Type": out.Headers["Content-Type"][0]}}, nil
}

// decodeWorkOrder is the work order of ev: the one Layer 1 decoded for the
// handler (v, ok: idem.DecodedRequest), else decoded here; a body that is
// not one is the envelope (400 validation_error naming the field, 415).
func decodeWorkOrder(ev events.APIGatewayV2HTTPRequest, v any, ok bool) (workorder.WorkOrder, *apierr.Error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return workorder.WorkOrder{}, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body could not be decoded")
		}
		body = b
	}
	var wo workorder.WorkOrder
	mt, err := canon.MediaType(header.First(ev.Headers, "Content-Type"))
	if err == nil {
		wo, err = workorder.From(v, ok, mt, body)
	}
	if err != nil {
		var ve *canon.ValidationError
		switch {
		case errors.Is(err, idem.ErrUnsupportedMediaType):
			return wo, apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType,
				"the body must be a work order in application/json, application/xml or text/xml")
		case errors.As(err, &ve) && ve.Field != "":
			return wo, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the work order is invalid: %s", ve.Message).
				WithDetails(map[string]any{"field": ve.Field})
		}
		return wo, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the work order is invalid: %s", err.Error())
	}
	return wo, nil
}

// The ERP policy's live work-order route: POST
// /api/v1/inbound/work-orders, under Layer 1 with the work-order contract
// (workorder.Contract, set on the Guard's route workorder.RouteLive by the
// host's wiring), so the canonical request hash is taken after decode,
// normalisation and validation (equal JSON and XML bodies under one key
// replay), the raw body's SHA-256 is kept beside it, and every answer is
// rendered per the Accept of the request it answers.
const (
	OpLiveWorkOrder   = "createInboundWorkOrder"
	LiveWorkOrderPath = "/api/v1/inbound/work-orders"
)

// MaxProjectQuantity is the largest quantity of one project the reference
// host processes; a project above it is skipped.
const MaxProjectQuantity = 10000

// CodeNoProjectProcessed is the deterministic business answer (HTTP 409)
// of a work order none of whose projects is processed under the ERP
// policy, whose contract names it: stored and replayed like any final
// answer. Under another policy, whose error codes are the registry's and
// idemkit's own, the same answer is CodeNoProjectProcessedHost.
const CodeNoProjectProcessed = "NO_PROJECT_PROCESSED"

// CodeNoProjectProcessedHost is CodeNoProjectProcessed under a policy
// other than the ERP policy: a host code, in the registry's form for
// them.
const CodeNoProjectProcessedHost = "idemkit.no_project_processed"

// liveWorkOrder processes an inbound work order: its projects of a
// quantity up to MaxProjectQuantity are processed, the others skipped. It
// answers 201 {"request_id", "work_order_number", "processed_projects",
// "skipped_projects"}, or, when no project is processed, 409
// NO_PROJECT_PROCESSED with the skipped codes in details; request_id is
// the current attempt's on every answer (the ERP policy's
// erp.RequestIDMember), XML when the request's Accept prefers it.
func (h *Handler) liveWorkOrder(ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	v, ok := idem.DecodedRequest(ctx)
	wo, e := decodeWorkOrder(c.ev, v, ok)
	if e != nil {
		return errResp(e), nil
	}
	processed, skipped := 0, []string{}
	for _, p := range wo.Projects {
		if p.Quantity <= MaxProjectQuantity {
			processed++
		} else {
			skipped = append(skipped, p.Code)
		}
	}
	if processed == 0 {
		code := CodeNoProjectProcessed
		if h.guard.Policy.Name != erp.Policy.Name {
			code = CodeNoProjectProcessedHost
		}
		return errResp(apierr.New(http.StatusConflict, code, "no project of work order %s was processed", wo.Number).
			WithDetails(map[string]any{"skipped_projects": skipped})), nil
	}
	return jsonResp(http.StatusCreated, map[string]any{erp.RequestIDMember: c.ev.RequestContext.RequestID,
		"work_order_number": wo.Number, "processed_projects": processed, "skipped_projects": skipped})
}
