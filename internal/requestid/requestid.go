// Package requestid is the request-id stamp Layer 1 and the reference host
// share: the current request's id written into one top-level member of an
// answer's JSON body (a policy's request-id member: the ERP policy's
// request_id), every other byte of the body kept. Layer 1 stamps the
// answers it builds (idem's Guard); the host stamps only the answers it
// builds itself (functions/api/apifn), on its own response type, with no
// conversion through Layer 1's. It reads no policy: the caller names the
// member.
package requestid

import (
	"bytes"
	"encoding/json"

	"github.com/idemkit/idemkit/internal/header"
)

// Stamp returns body with its top-level member name set to the JSON string
// id, and true, when the body is a JSON object (contentType names JSON)
// that has the member with another value, or, for an error envelope (status
// 400 and up, a top-level "error" member) without the member, with it
// appended. Otherwise — name, id or body empty, another media type, the
// member already equal to id, a success body without the member — it
// returns body itself and false. Every other byte is kept, and body is
// never modified.
func Stamp(name string, status int, contentType string, body []byte, id string) ([]byte, bool) {
	if name == "" || id == "" || len(body) == 0 || !header.IsJSON(contentType) {
		return body, false
	}
	out, ok := setMember(body, name, id)
	if !ok && status >= 400 {
		out, ok = addToEnvelope(body, name, id)
	}
	return out, ok
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
