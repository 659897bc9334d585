package idem

import (
	"bytes"
	"encoding/json"
	"net/textproto"
)

// The request-id stamp: a policy with a RequestIDMember (the ERP policy's
// request_id) has every answer built from a handler's response carry the
// current request's id in that JSON member, replays included.

// stampRequestID returns resp with the top-level member Policy.RequestIDMember
// of its JSON object body set to requestID, when the policy names a member
// and the body has it with another value, or, for an error envelope (status
// 400 and up, a top-level "error" member) without it, added; otherwise resp
// itself. The rest
// of the body is kept byte for byte, and resp is never modified.
func (g *Guard) stampRequestID(resp *Response, requestID string) *Response {
	return stampMember(g.cfg.Policy.RequestIDMember, resp, requestID)
}

// StampRequestID returns resp as every answer of a host under p carries
// the current request's id, not only the answers the Guard builds: the
// header p.RequestIDHeader set to requestID, and the JSON member
// p.RequestIDMember set as the Guard sets it (an error envelope without it
// gains it). A host calls it on the answers produced outside Layer 1 — its
// 401 without a credential, 404, 405, 413, 415, a malformed path
// parameter, a tenant mismatch — so that under the ERP policy every answer
// carries X-Request-ID and every envelope its request_id, equal to it. A
// policy that names neither (or an empty requestID) returns resp itself;
// resp is never modified.
func (p Policy) StampRequestID(resp *Response, requestID string) *Response {
	if resp == nil || requestID == "" || p.RequestIDHeader == "" && p.RequestIDMember == "" {
		return resp
	}
	out := stampMember(p.RequestIDMember, resp, requestID)
	if p.RequestIDHeader == "" {
		return out
	}
	h := make(map[string][]string, len(out.Headers)+1)
	for k, v := range out.Headers {
		h[k] = v
	}
	setRequestIDHeader(h, p.RequestIDHeader, requestID)
	return &Response{Status: out.Status, Headers: h, Body: out.Body}
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

func stampMember(name string, resp *Response, requestID string) *Response {
	if name == "" || resp == nil || requestID == "" || len(resp.Body) == 0 {
		return resp
	}
	if ct := resp.Headers["Content-Type"]; len(ct) == 0 || !isJSONType(ct[0]) {
		return resp
	}
	body, ok := setMember(resp.Body, name, requestID)
	if !ok && resp.Status >= 400 {
		body, ok = addToEnvelope(resp.Body, name, requestID)
	}
	if !ok {
		return resp
	}
	out := &Response{Status: resp.Status, Headers: make(map[string][]string, len(resp.Headers)), Body: body}
	for k, v := range resp.Headers {
		out.Headers[k] = v
	}
	return out
}

// setMember replaces the value of the top-level member name of the JSON
// object body with the JSON string value, keeping every other byte. ok is
// false (and body unchanged) when body is not a JSON object, has no such
// member, or already holds value there.
func setMember(body []byte, name, value string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return body, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return body, false
		}
		key, _ := tok.(string)
		keyEnd := int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return body, false
		}
		end := int(dec.InputOffset())
		if key != name {
			continue
		}
		start := keyEnd
		for start < end && (body[start] == ':' || body[start] == ' ' || body[start] == '\t' || body[start] == '\n' || body[start] == '\r') {
			start++
		}
		enc, err := json.Marshal(value)
		if err != nil || bytes.Equal(body[start:end], enc) {
			return body, false
		}
		out := make([]byte, 0, len(body)-(end-start)+len(enc))
		out = append(append(append(out, body[:start]...), enc...), body[end:]...)
		return out, true
	}
	return body, false
}

// addToEnvelope appends the member name with the JSON string value to an
// error envelope body: a JSON object with a top-level "error" member and no
// member name. Every other byte is kept. ok is false (and body unchanged)
// for any other body.
func addToEnvelope(body []byte, name, value string) ([]byte, bool) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return body, false
	}
	if _, has := top["error"]; !has {
		return body, false
	}
	if _, has := top[name]; has {
		return body, false
	}
	end := bytes.LastIndexByte(body, '}')
	if end < 0 {
		return body, false
	}
	k, err1 := json.Marshal(name)
	v, err2 := json.Marshal(value)
	if err1 != nil || err2 != nil {
		return body, false
	}
	out := make([]byte, 0, len(body)+len(k)+len(v)+2)
	out = append(out, bytes.TrimRight(body[:end], " \t\r\n")...)
	out = append(out, ',')
	out = append(append(append(out, k...), ':'), v...)
	return append(out, body[end:]...), true
}
