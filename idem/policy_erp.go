package idem

import (
	"bytes"
	"encoding/json"

	"github.com/idemkit/idemkit/internal/apierr"
)

// Credential names of the ERP policy's scope (Policy.Scope.Credential):
// authorizer context keys (or JWT claims, or names passed to
// Config.HTTPCredential) carrying the calling client (the authenticated
// principal), and the company and organisation it acts for (the tenant the
// canonical request hash includes).
const (
	CredentialClient       = "clientId"
	CredentialCompany      = "companyId"
	CredentialOrganization = "organizationId"
)

// The ERP policy's error codes: the "error" member of the Guard's own
// envelopes under PolicyERP, in place of the OpenWOP registry code.
const (
	// CodeERPRequestInProgress is 409 while another request owns an active
	// processing lease on the key (OpenWOP idempotency_in_flight).
	CodeERPRequestInProgress = "IDEMPOTENCY_REQUEST_IN_PROGRESS"
	// CodeERPKeyConflict is 409 for the same scope and key with a different
	// canonical payload (OpenWOP idempotency_key_mismatch).
	CodeERPKeyConflict = "IDEMPOTENCY_KEY_CONFLICT"
)

// MessageERPKeyConflict is the ERP policy's text of CodeERPKeyConflict.
const MessageERPKeyConflict = "The Idempotency-Key has already been used with a different request payload."

// RequestIDMember is the envelope member the ERP policy sets to the current
// attempt's request id (Policy.RequestIDMember).
const RequestIDMember = "request_id"

// erpCodes maps the OpenWOP registry codes the ERP policy has codes of its
// own for to those codes, with the policy's text where it prescribes one.
var erpCodes = map[string]struct{ code, message string }{
	apierr.CodeIdempotencyInFlight:    {code: CodeERPRequestInProgress},
	apierr.CodeIdempotencyKeyMismatch: {code: CodeERPKeyConflict, message: MessageERPKeyConflict},
}

// erpEnvelope is the ERP policy's error envelope, in member order.
type erpEnvelope struct {
	Error     string         `json:"error"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details,omitempty"`
	RequestID string         `json:"request_id"`
}

// ERPErrorBody is PolicyERP's Policy.ErrorBody: the envelope
// {error, message, details?, request_id}. error is the ERP policy's own
// code where it defines one (IDEMPOTENCY_REQUEST_IN_PROGRESS for
// idempotency_in_flight, IDEMPOTENCY_KEY_CONFLICT with its prescribed
// message for idempotency_key_mismatch) and the OpenWOP registry code
// otherwise (the policy defines no code for an invalid or missing key, an
// unauthenticated request or a refused body); request_id is always the
// current attempt's request id.
func ERPErrorBody(e ErrorInfo) []byte {
	env := erpEnvelope{Error: e.Code, Message: e.Message, Details: e.Details, RequestID: e.RequestID}
	if c, ok := erpCodes[e.Code]; ok {
		env.Error = c.code
		if c.message != "" {
			env.Message = c.message
		}
	}
	b, err := json.Marshal(env)
	if err != nil { // details that do not marshal: the envelope without them
		env.Details = nil
		b, _ = json.Marshal(env)
	}
	return b
}

// stampRequestID returns resp with the top-level member Policy.RequestIDMember
// of its JSON object body set to requestID, when the policy names a member
// and the body has it with another value, or, for an error envelope (status
// 400 and up, a top-level "error" member) without it, added; otherwise resp
// itself. The rest
// of the body is kept byte for byte, and resp is never modified.
func (g *Guard) stampRequestID(resp *Response, requestID string) *Response {
	name := g.cfg.Policy.RequestIDMember
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
