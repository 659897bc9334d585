package workorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idem/canon"
)

// decodeJSON reads a work order in JSON strictly: the body is UTF-8 (no
// byte-order mark, no invalid byte, no \u escape of a lone surrogate, each
// of which a lenient decoder turns into U+FFFD so that different bodies
// read alike); one object with exactly the contract's member names (matched
// byte for byte, not in another letter case), each at most once, each of
// its type (null is no member's value); nothing after it.
func decodeJSON(body []byte) (WorkOrder, error) {
	var w WorkOrder
	if err := checkJSONText(body); err != nil {
		return w, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return w, &canon.ValidationError{Message: "the body is empty: a work order in JSON is required"}
	}
	d := &jsonReader{dec: json.NewDecoder(bytes.NewReader(body))}
	d.dec.UseNumber()
	err := d.object("", func(name, at string) error {
		switch name {
		case "work_order_number":
			s, err := d.str(at)
			w.Number = s
			return err
		case "projects":
			return d.array(at, func(i int, at string) error {
				var p Project
				err := d.object(at, func(name, at string) error {
					var err error
					switch name {
					case "code":
						p.Code, err = d.str(at)
					case "name":
						p.Name, err = d.str(at)
					case "quantity":
						p.Quantity, err = d.integer(at)
					default:
						return unknown(at)
					}
					return err
				})
				w.Projects = append(w.Projects, p)
				return err
			})
		}
		return unknown(at)
	})
	if err != nil {
		return w, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return w, &canon.ValidationError{Message: "data after the work order's JSON object (the object must be the whole body)"}
	}
	return w, nil
}

func unknown(at string) error {
	return &canon.ValidationError{Field: at, Message: "not a member of the work-order contract (names are matched exactly)"}
}

// jsonReader walks the token stream of one JSON document.
type jsonReader struct{ dec *json.Decoder }

func (d *jsonReader) token(at string) (json.Token, error) {
	t, err := d.dec.Token()
	if err != nil {
		return nil, &canon.ValidationError{Field: at, Message: jsonSyntaxMessage(err)}
	}
	return t, nil
}

// jsonSyntaxMessage says in the host's words why the JSON tokens could not
// be read (never encoding/json's text, "EOF" or "invalid character ...").
func jsonSyntaxMessage(err error) string {
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends before the work order does"
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", se.Offset)
	}
	return "the body is not valid JSON"
}

// object reads an object, calling member for each member with its name and
// pointer; a name seen twice is refused.
func (d *jsonReader) object(at string, member func(name, at string) error) error {
	t, err := d.token(at)
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return typeErr(at, "an object")
	}
	seen := map[string]bool{}
	for d.dec.More() {
		t, err := d.token(at)
		if err != nil {
			return err
		}
		name := t.(string) // a member name is always a string token
		// A JSON Pointer: "~" and "/" in the name escaped (RED_TEAM 484).
		ptr := at + "/" + pointerEscaper.Replace(name)
		if seen[name] {
			return &canon.ValidationError{Field: ptr, Message: "member given twice"}
		}
		seen[name] = true
		if err := member(name, ptr); err != nil {
			return err
		}
	}
	_, err = d.token(at) // '}'
	return err
}

// pointerEscaper escapes a member name as a JSON Pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// array reads an array, calling elem for each element.
func (d *jsonReader) array(at string, elem func(i int, at string) error) error {
	t, err := d.token(at)
	if err != nil {
		return err
	}
	if t != json.Delim('[') {
		return typeErr(at, "an array")
	}
	for i := 0; d.dec.More(); i++ {
		if err := elem(i, fmt.Sprintf("%s/%d", at, i)); err != nil {
			return err
		}
	}
	_, err = d.token(at) // ']'
	return err
}

func (d *jsonReader) str(at string) (string, error) {
	t, err := d.token(at)
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", typeErr(at, "a string")
	}
	return s, nil
}

func (d *jsonReader) integer(at string) (int, error) {
	t, err := d.token(at)
	if err != nil {
		return 0, err
	}
	n, ok := t.(json.Number)
	if !ok {
		return 0, typeErr(at, "an integer")
	}
	return parseQuantity(at, n.String())
}

func typeErr(at, want string) error {
	return &canon.ValidationError{Field: at, Message: "must be " + want}
}

// checkJSONText refuses what a JSON decoder would read lossily: a body that
// is not UTF-8, a byte-order mark, and a \u escape of a surrogate that is
// not the high half of a pair followed by its low half.
func checkJSONText(b []byte) error {
	if !utf8.Valid(b) {
		return &canon.ValidationError{Message: "the body is not valid UTF-8"}
	}
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		return &canon.ValidationError{Message: "the body starts with a byte-order mark"}
	}
	lone := &canon.ValidationError{Message: `a \u escape of a lone surrogate is not a character`}
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			in = !in
		case in && c == '\\' && i+1 < len(b):
			if b[i+1] != 'u' {
				i++
				continue
			}
			u, ok := hex4(b, i+2)
			if !ok {
				return nil // malformed: the decoder refuses it
			}
			i += 5
			switch {
			case u >= 0xDC00 && u <= 0xDFFF:
				return lone
			case u >= 0xD800 && u <= 0xDBFF:
				if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
					return lone
				}
				if lo, ok := hex4(b, i+3); !ok || lo < 0xDC00 || lo > 0xDFFF {
					return lone
				}
				i += 6
			}
		}
	}
	return nil
}

// hex4 reads four hexadecimal digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
