// Package jsonerr is the 400 validation_error of a JSON request body that
// is not strict RFC 8785 input: not valid JSON, not I-JSON (RFC 7493), or
// with a number no IEEE 754 double holds exactly. Layer 1 answers such a
// body with it before its digest, and a host with it before it parses one:
// the same body gets the same answer, whichever refuses it.
package jsonerr

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/jcs"
)

// Check returns the answer Refusal gives for body when it is JSON text
// that is not strict RFC 8785 input (the input of the Layer-1 digest of a
// JSON body): a member name twice in an object, a string with a lone
// surrogate escape or bytes that are not UTF-8, nesting deeper than
// jcs.MaxDepth, a number no double holds, exactly or at all. It returns
// nil for strict input, and for a body that is not JSON text at all (a
// syntax error, a byte order mark), whose answer is the caller's parser's.
func Check(body []byte) *apierr.Error {
	_, err := jcs.Sum256Exact(body)
	if err == nil || bytes.HasPrefix(body, utf8BOM) {
		return nil
	}
	for _, strict := range []error{jcs.ErrDuplicateKey, jcs.ErrLoneSurrogate, jcs.ErrInvalidUTF8, jcs.ErrTooDeep, jcs.ErrNumber, jcs.ErrInexactNumber} {
		if errors.Is(err, strict) {
			return Refusal(body, err)
		}
	}
	return nil
}

// Refusal is the 400 validation_error for a body the JCS digest refused
// with err. A number that no double holds (exactly, or at all) is named by
// its JSON Pointer in the message and in details.field; a body that is not
// I-JSON, or starts with a byte order mark, is explained by notIJSON.
func Refusal(body []byte, err error) *apierr.Error {
	var je *jcs.Error
	if errors.As(err, &je) && (errors.Is(je, jcs.ErrInexactNumber) || errors.Is(je, jcs.ErrNumber)) {
		if ptr, ok := jcs.Pointer(body, je.Offset); ok {
			where := "member " + strconv.Quote(ptr)
			if ptr == "" {
				where = "top-level value"
			}
			what := "a number that an IEEE 754 double cannot hold exactly (RFC 8785 hashes numbers as doubles)"
			if errors.Is(je, jcs.ErrNumber) {
				what = "a number outside the range of an IEEE 754 double"
			}
			return apierr.New(400, apierr.CodeValidation, "The request body's %s is %s; send it as a string.", where, what).
				WithDetails(map[string]any{"field": ptr})
		}
	}
	if e := notIJSON(body, err); e != nil {
		return e
	}
	return apierr.New(400, apierr.CodeValidation, "The request body is not valid JSON.")
}

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
