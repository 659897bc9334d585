package idem

import (
	"net/textproto"

	"github.com/idemkit/idemkit/internal/requestid"
)

// The request-id stamp: a policy with a RequestIDMember (the ERP policy's
// request_id) has every answer built from a handler's response carry the
// current request's id in that JSON member, replays included, and a policy
// with a RequestIDHeader every answer the Guard builds carry it in that
// header (decorate). The byte-level stamp is internal/requestid, which a
// host also uses on the answers it builds outside Layer 1.

// stampRequestID returns resp with the top-level member Policy.RequestIDMember
// of its JSON object body set to requestID, when the policy names a member
// and the body has it with another value, or, for an error envelope (status
// 400 and up, a top-level "error" member) without it, added; otherwise resp
// itself. The rest of the body is kept byte for byte, and resp is never
// modified.
func (g *Guard) stampRequestID(resp *Response, requestID string) *Response {
	return stampMember(g.cfg.Policy.RequestIDMember, resp, requestID)
}

// setRequestIDHeader sets the header name (canonicalised) of h to
// requestID, unless it holds that one value already.
func setRequestIDHeader(h map[string][]string, name, requestID string) {
	ck := textproto.CanonicalMIMEHeaderKey(name)
	if vs := h[ck]; len(vs) == 1 && vs[0] == requestID {
		return
	}
	h[ck] = []string{requestID}
}

// stampMember is requestid.Stamp on resp: a new Response with the stamped
// body and a copy of resp's headers, or resp itself when the stamp changes
// nothing. The stamped body is not the bytes the handler described: its
// validators are not carried over as they were (otherBytesHeaders): a strong
// ETag is made weak, and its Content-Length and digests are dropped.
func stampMember(name string, resp *Response, requestID string) *Response {
	if resp == nil {
		return resp
	}
	ct := ""
	if vs := resp.Headers["Content-Type"]; len(vs) > 0 {
		ct = vs[0]
	}
	body, ok := requestid.Stamp(name, resp.Status, ct, resp.Body, requestID)
	if !ok {
		return resp
	}
	return &Response{Status: resp.Status, Headers: otherBytesHeaders(resp.Headers, 0), Body: body}
}
