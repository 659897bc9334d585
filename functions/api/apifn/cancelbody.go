package apifn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/apierr"
)

// checkCancelBody holds cancelRun's optional body to the operation's
// schema before anything runs (so a refusal is never an Idempotency-Key's
// answer): no body, or one of at most MaxBodyBytes that is a JSON object
// whose reason, if present, is a string of at most maxCancelReason
// characters; other members are allowed (the
// schema is open). A non-empty body of another media type is 415
// unsupported_media_type; anything else it refuses is 400
// validation_error, details.field "reason" for a reason that is not a
// string. An empty body is accepted whatever its Content-Type (an empty
// curl -d sends a form type).
func checkCancelBody(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if e := checkBodySize(ev); e != nil {
		return e
	}
	body, e := eventBody(ev)
	if e != nil {
		return e
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if e := checkBody(ev); e != nil {
		return e
	}
	var m map[string]json.RawMessage
	if !json.Valid(body) {
		return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "The request body is not valid JSON.")
	}
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object {reason?}")
	}
	if r, ok := m["reason"]; ok {
		var s *string
		if json.Unmarshal(r, &s) != nil || s == nil {
			return validation("reason", "reason must be a string")
		}
		if utf8.RuneCountInString(*s) > maxCancelReason {
			return validation("reason", fmt.Sprintf("reason is at most %d characters", maxCancelReason)).
				WithDetails(map[string]any{"field": "reason", "maxLength": maxCancelReason})
		}
	}
	return nil
}

// maxCancelReason is the most characters of a cancel's reason, which is
// kept on the run (Run.CancelReason) and echoed by run.cancelled.
const maxCancelReason = 1024

// cancelReason is the reason of a cancel request's body that
// checkCancelBody accepted; "" when it has none.
func cancelReason(ev events.APIGatewayV2HTTPRequest) string {
	body, e := eventBody(ev)
	if e != nil {
		return ""
	}
	// The member named exactly "reason", as checkCancelBody checked it
	// (a struct field would also match "Reason" or "REASON").
	var m map[string]json.RawMessage
	var reason string
	if json.Unmarshal(body, &m) != nil || json.Unmarshal(m["reason"], &reason) != nil {
		return ""
	}
	return reason
}
