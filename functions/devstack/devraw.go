package devstack

import (
	"errors"
	"net/http"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/rawconn"
)

// The dev gateway hands the api handler the Idempotency-Key header as it
// was received, like API Gateway's HTTP API, which preserves whitespace
// around a header value: Go's HTTP server trims it before any handler runs,
// and without the raw value the ERP policy's "leading or trailing
// whitespace is rejected" rule could not hold behind `idemkit dev`.
// net/http has no hook for the raw header lines, so the server is
// configured with rawconn: each request gets the header block of exactly
// that request (never a pipelined request's, never bytes of a body), and a
// request whose block is not known is refused, never served under a
// guessed key.

// reasonFolded is the details.reason of a refused folded Idempotency-Key
// (beside the Layer-1 reasons: whitespace, charset, ...).
const reasonFolded = "folded"

// rawHeaders reads r's header block as received (rawconn) and returns the
// Idempotency-Key values as received (ok false: r was not served through
// rawconn, use the values net/http parsed), or the refusal of r: its block
// is not known (400, the connection is closed after the answer), or its
// Idempotency-Key or Authorization is folded onto another line (obsolete
// line folding, refused with 400 as RFC 9112 allows, under every policy:
// net/http would join the lines into a value the client never sent).
func rawHeaders(r *http.Request) (keys []string, ok bool, refuse *apierr.Error) {
	head, err := rawconn.HeadOf(r.Context())
	switch {
	case errors.Is(err, rawconn.ErrNotRaw):
		return nil, false, nil
	case err != nil:
		return nil, false, apierr.New(http.StatusBadRequest, apierr.CodeValidation,
			"the request's header lines could not be read as received (malformed or oversized framing on this connection)")
	}
	if _, err := head.Values("Authorization"); err != nil {
		return nil, false, apierr.New(http.StatusBadRequest, apierr.CodeValidation,
			"the Authorization header is folded across lines (obsolete line folding is refused)").
			WithDetails(map[string]any{"field": "Authorization"})
	}
	keys, err = head.Values(idem.HeaderKey)
	if err != nil {
		return nil, false, apierr.New(http.StatusBadRequest, apierr.CodeIdempotencyKeyInvalid,
			"The Idempotency-Key header is invalid (%s).", reasonFolded).
			WithDetails(map[string]any{"reason": reasonFolded})
	}
	return keys, true, nil
}

// writePolicyError answers e the way Layer 1 answers a request it refuses
// before any key is valid: the policy's error envelope (under the ERP
// policy with request_id) and the policy's headers for an answer without a
// key (under the ERP policy X-Request-ID), requestID the request's id.
func (g *gateway) writePolicyError(w http.ResponseWriter, e *apierr.Error, requestID string) {
	body := g.policy.ErrorBody
	if body == nil { // the OpenWOP default: the envelope itself
		body = func(idem.ErrorInfo) []byte { return e.Body() }
	}
	if g.policy.Headers != nil {
		h := map[string][]string{}
		g.policy.Headers(h, idem.Answer{RequestID: requestID})
		for k, vs := range h {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
	}
	for k, v := range e.Headers() {
		w.Header().Set(k, v)
	}
	w.Header().Set("OpenWOP-Version", settings.ProtocolVersion)
	w.WriteHeader(e.Status)
	_, _ = w.Write(body(idem.ErrorInfo{Status: e.Status, Code: e.Code, Message: e.Message, Details: e.Details, RequestID: requestID}))
}
