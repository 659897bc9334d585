package apifn

import (
	"bytes"
	"encoding/json"
	"net/http"

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
	m, e := bodyObject(ev, "{reason?}")
	if e != nil {
		return e
	}
	if r, ok := m["reason"]; ok {
		return checkReason(r)
	}
	return nil
}

// bodyObject reads an optional JSON object body of a route whose schema
// is shape (named in messages): nil and no error for an empty body
// (whatever its Content-Type: an empty curl -d sends a form type), its
// members otherwise. A body over MaxBodyBytes, of another media type, not
// JSON or not an object is refused in the envelope (413, 415, 400).
func bodyObject(ev events.APIGatewayV2HTTPRequest, shape string) (map[string]json.RawMessage, *apierr.Error) {
	if e := checkBodySize(ev); e != nil {
		return nil, e
	}
	body, e := eventBody(ev)
	if e != nil {
		return nil, e
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	if e := checkBody(ev); e != nil {
		return nil, e
	}
	if !json.Valid(body) {
		return nil, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "The request body is not valid JSON.")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be a JSON object %s", shape)
	}
	return m, nil
}

// maxCancelReason is the most characters of a cancel's reason, which is
// kept on the run (Run.CancelReason) and echoed by run.cancelled.
const maxCancelReason = 1024

// cancelReason is the reason of a cancel request's body that
// checkCancelBody accepted; "" when it has none.
func cancelReason(ev events.APIGatewayV2HTTPRequest) string {
	return bodyString(ev, "reason")
}
