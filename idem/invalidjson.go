package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/jcs"
)

// utf8BOM is the byte order mark RFC 8259 §8.1 forbids before a JSON text.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// notIJSON is the 400 validation_error for a body that parses as JSON but
// is not I-JSON (RFC 7493), which RFC 8785 requires, or that starts with a
// byte order mark; its message says what to fix and, where a member is at
// fault, details.field is its JSON Pointer. It returns nil for any other
// error (the caller's plain "not valid JSON").
func notIJSON(body []byte, err error) *apierr.Error {
	if bytes.HasPrefix(body, utf8BOM) {
		return apierr.New(400, apierr.CodeValidation,
			"The request body is not valid JSON: it starts with a byte order mark (RFC 8259 §8.1); send the JSON without it.")
	}
	var je *jcs.Error
	if !errors.As(err, &je) {
		return nil
	}
	switch {
	case errors.Is(je, jcs.ErrDuplicateKey):
		name, ptr, ok := duplicateMember(body, je.Offset)
		if !ok {
			return apierr.New(400, apierr.CodeValidation, "The request body is not I-JSON: an object has a member name twice.")
		}
		where := "the object " + strconv.Quote(ptr[:strings.LastIndexByte(ptr, '/')])
		if strings.Count(ptr, "/") == 1 {
			where = "the top-level object"
		}
		return apierr.New(400, apierr.CodeValidation, "The request body is not I-JSON: %s has the member name %s twice.", where, strconv.Quote(name)).
			WithDetails(map[string]any{"field": ptr})
	case errors.Is(je, jcs.ErrLoneSurrogate), errors.Is(je, jcs.ErrInvalidUTF8):
		what := "a lone UTF-16 surrogate escape (I-JSON strings are Unicode text)"
		if errors.Is(je, jcs.ErrInvalidUTF8) {
			what = "bytes that are not valid UTF-8"
		}
		if ptr, ok := jcs.Pointer(body, je.Offset); ok {
			return apierr.New(400, apierr.CodeValidation, "The request body is not I-JSON: the string at %s has %s.", strconv.Quote(ptr), what).
				WithDetails(map[string]any{"field": ptr})
		}
		return apierr.New(400, apierr.CodeValidation, "The request body is not I-JSON: a string has %s.", what)
	case errors.Is(je, jcs.ErrTooDeep):
		return apierr.New(400, apierr.CodeValidation, "The request body nests arrays and objects deeper than %d levels.", jcs.MaxDepth)
	}
	return nil
}

// duplicateMember reads the member whose name starts at offset in body (a
// name its object already has): the name, and the JSON Pointer of the
// member (its value's).
func duplicateMember(body []byte, offset int64) (name, ptr string, ok bool) {
	if offset < 0 || offset >= int64(len(body)) {
		return "", "", false
	}
	dec := json.NewDecoder(bytes.NewReader(body[offset:]))
	tok, err := dec.Token()
	if name, ok = tok.(string); err != nil || !ok {
		return "", "", false
	}
	rest := bytes.TrimLeft(body[offset+dec.InputOffset():], " \t\r\n")
	if !bytes.HasPrefix(rest, []byte(":")) {
		return "", "", false
	}
	value := int64(len(body)) - int64(len(bytes.TrimLeft(rest[1:], " \t\r\n")))
	ptr, ok = jcs.Pointer(body, value)
	return name, ptr, ok
}
