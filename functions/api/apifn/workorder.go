package apifn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem"
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
	body := []byte(c.ev.Body)
	if c.ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(c.ev.Body)
		if err != nil {
			return errResp(apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body could not be decoded")), nil
		}
		body = b
	}
	mt := ""
	if ct := header.First(c.ev.Headers, "Content-Type"); ct != "" {
		if m, _, err := mime.ParseMediaType(ct); err == nil {
			mt = m
		} else {
			mt = strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
		}
	}
	v, err := workorder.Decode(mt, body)
	if err != nil {
		var ve *idem.ValidationError
		switch {
		case errors.Is(err, idem.ErrUnsupportedMediaType):
			return errResp(apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType,
				"the body must be a work order in application/json, application/xml or text/xml")), nil
		case errors.As(err, &ve) && ve.Field != "":
			return errResp(apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the work order is invalid: %s", ve.Message).
				WithDetails(map[string]any{"field": ve.Field})), nil
		}
		return errResp(apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the work order is invalid: %s", err.Error())), nil
	}
	wo := v.(workorder.WorkOrder)
	b, err := json.Marshal(map[string]any{"valid": true, "work_order_number": wo.Number, "projects": len(wo.Projects)})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out := workorder.Render(&idem.Response{Status: http.StatusOK, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: b},
		header.First(c.ev.Headers, "Accept"))
	return events.APIGatewayV2HTTPResponse{StatusCode: out.Status, Body: string(out.Body),
		Headers: map[string]string{"Content-Type": out.Headers["Content-Type"][0]}}, nil
}
