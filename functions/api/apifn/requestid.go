package apifn

import (
	"net/textproto"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/requestid"
)

// The request id on every answer. Under a policy that marks answers with
// the current request's id (idem.Policy.RequestIDHeader and
// RequestIDMember: the ERP policy's X-Request-ID and request_id), every
// answer of the handler carries it. Layer 1 marks the answers it builds
// (Handler.dispatch says which), and the handler does not touch them; the
// handler marks only its own: a 404, a 405, a 413, a 415, a malformed
// runId, a 403 tenant mismatch, a route outside Layer 1, a success body of
// a handler that ran outside a claim; and `idemkit dev`'s gateway marks
// its own answers in front of the handler (its 401 without a credential)
// the same way (ErrorAnswer).

// requestIDMarks are the marks the Guard's policy puts on every answer,
// read once by New: the header (canonicalised) and the JSON member that
// carry the current request's id; "" for a mark the policy does not name.
type requestIDMarks struct {
	header, member string
}

// stamp returns resp, an answer the host built outside Layer 1, marked
// with requestID as the Layer-1 policy says, directly on the Lambda
// response: the header set (any other header kept, in a new map), and the
// member of a JSON body set, or added to an error envelope, every other
// byte kept (requestid.Stamp; a base64-encoded body is left as it is).
// resp itself under a policy that marks nothing or without a request id.
func (h *Handler) stamp(resp events.APIGatewayV2HTTPResponse, requestID string) events.APIGatewayV2HTTPResponse {
	m := h.marks
	if requestID == "" || m.header == "" && m.member == "" {
		return resp
	}
	if !resp.IsBase64Encoded {
		if b, ok := requestid.Stamp(m.member, resp.StatusCode, resp.Headers["Content-Type"], []byte(resp.Body), requestID); ok {
			resp.Body = string(b)
		}
	}
	headers := make(map[string]string, len(resp.Headers)+1)
	for k, v := range resp.Headers {
		headers[k] = v
	}
	if m.header != "" {
		headers[m.header] = requestID
	}
	resp.Headers = headers
	return resp
}

// marksOf returns the request-id marks of a policy's header and member
// names.
func marksOf(header, member string) requestIDMarks {
	if header != "" {
		header = textproto.CanonicalMIMEHeaderKey(header)
	}
	return requestIDMarks{header: header, member: member}
}

// ErrorAnswer is the envelope e as the handler answers it to the request
// with id requestID: marked with the request id where the Layer-1 policy
// says so. `idemkit dev`'s gateway answers with it in front of the
// handler (the authorizer's 401, a store that does not answer).
func (h *Handler) ErrorAnswer(e *apierr.Error, requestID string) events.APIGatewayV2HTTPResponse {
	return h.stamp(errResp(e), requestID)
}
