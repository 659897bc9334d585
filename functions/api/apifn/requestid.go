package apifn

import (
	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
)

// The request id on every answer. Under a policy that marks answers with
// the current request's id (idem.Policy.RequestIDHeader and
// RequestIDMember: the ERP policy's X-Request-ID and request_id), every
// answer of the handler carries it. Layer 1 marks the answers it builds
// (Handler.dispatch says which); the handler marks only its own: a 404, a
// 405, a 413, a 415, a malformed runId, a 403 tenant mismatch, a route
// outside Layer 1, a success body of a handler that ran outside a claim;
// and `idemkit dev`'s gateway marks its own answers in front of the
// handler (its 401 without a credential) the same way (ErrorAnswer).

// stamp returns resp, an answer the host built outside Layer 1, marked
// with requestID as the Layer-1 policy says (idem.Policy.StampRequestID);
// resp itself under a policy that marks nothing.
func (h *Handler) stamp(resp events.APIGatewayV2HTTPResponse, requestID string) events.APIGatewayV2HTTPResponse {
	p := h.cfg.Guard.Config().Policy
	if requestID == "" || p.RequestIDHeader == "" && p.RequestIDMember == "" {
		return resp
	}
	in := &idem.Response{Status: resp.StatusCode, Headers: make(map[string][]string, len(resp.Headers))}
	for k, v := range resp.Headers {
		in.Headers[k] = []string{v}
	}
	if !resp.IsBase64Encoded {
		in.Body = []byte(resp.Body)
	}
	out := p.StampRequestID(in, requestID)
	if !resp.IsBase64Encoded {
		resp.Body = string(out.Body)
	}
	resp.Headers = make(map[string]string, len(out.Headers))
	for k, vs := range out.Headers {
		if len(vs) > 0 {
			resp.Headers[k] = vs[0]
		}
	}
	return resp
}

// ErrorAnswer is the envelope e as the handler answers it to the request
// with id requestID: marked with the request id where the Layer-1 policy
// says so. `idemkit dev`'s gateway answers with it in front of the
// handler (the authorizer's 401, a store that does not answer).
func (h *Handler) ErrorAnswer(e *apierr.Error, requestID string) events.APIGatewayV2HTTPResponse {
	return h.stamp(errResp(e), requestID)
}
