package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"reflect"
	"sync"
)

// Canonicalize returns the RFC 8785 canonical form of the JSON text data
// (one value, optionally surrounded by whitespace). It returns a new slice
// and never modifies data. Errors are *SyntaxError or an *Error wrapping one
// of the sentinels (see the package documentation).
func Canonicalize(data []byte) ([]byte, error) {
	out, err := Append(make([]byte, 0, len(data)), data)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Append appends the canonical form of data to dst and returns the extended
// slice. On error it returns dst[:len(dst)] unchanged in content, so a
// caller can reuse one buffer across calls without allocating.
func Append(dst, data []byte) ([]byte, error) {
	return appendMode(dst, data, false)
}

// CanonicalizeExact is Canonicalize for inputs whose numbers must keep their
// value: a number whose canonical form has a different decimal value than
// its literal fails with an error matching ErrInexactNumber (an *Error
// whose Offset is the number's first byte; Pointer names its member). Over
// the inputs it accepts, canonical forms are equal exactly when the values
// are equal, numbers included.
func CanonicalizeExact(data []byte) ([]byte, error) {
	out, err := appendMode(make([]byte, 0, len(data)), data, true)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func appendMode(dst, data []byte, exact bool) ([]byte, error) {
	s := statePool.Get().(*state)
	s.data = data
	s.exact = exact
	s.dst = dst
	n := len(dst)
	err := s.run()
	out := s.dst
	s.reset()
	statePool.Put(s)
	if err != nil {
		return out[:n], err
	}
	return out, nil
}

// Marshal returns the canonical form of v as encoding/json would encode it:
// json struct tags, MarshalJSON methods and []byte-as-base64 all apply, and
// the result is then canonicalised (members sorted by UTF-16 code units, no
// HTML escaping, ECMAScript numbers). encoding/json replaces invalid UTF-8 in
// Go strings with U+FFFD before canonicalisation sees it. Every number
// becomes an IEEE 754 double, as RFC 8785 requires: integers beyond ±2^53
// lose precision (1<<60 is written 1152921504606847000), so carry such
// values as strings. NaN and ±Inf floats
// fail with an error matching ErrNumber; a json.RawMessage or MarshalJSON
// result with duplicate keys fails with ErrDuplicateKey.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		var uve *json.UnsupportedValueError
		if errors.As(err, &uve) && (uve.Value.Kind() == reflect.Float64 || uve.Value.Kind() == reflect.Float32) {
			return nil, fmt.Errorf("%w: %w", ErrNumber, err)
		}
		return nil, err
	}
	return Canonicalize(buf.Bytes())
}

// maxPooledBuf is the largest scratch buffer kept for reuse: room for the
// 6 MB request payload that AWS Lambda accepts, so that digesting any body a
// function can receive does not allocate in the steady state.
const maxPooledBuf = 8 << 20

var statePool = sync.Pool{New: func() any { return new(state) }}

// member is one object member while its object is being written: its
// unescaped name is data[kOff:kEnd] (the name as written, when it has no
// escapes) or keys[kOff:kEnd] (when esc is set); the canonical
// `"name":value` text is dst[start:end] (no comma); at is the name's offset
// in the input.
type member struct {
	kOff, kEnd int
	start, end int
	at         int
	esc        bool
}

// state is one canonicalisation in progress. Its scratch slices (keys,
// members, scratch, buf) are stacks shared by all nesting levels and are
// kept across calls through statePool, so a call allocates nothing once
// they have grown to the size of the inputs it sees.
type state struct {
	data    []byte
	exact   bool // reject numbers whose canonical form changes their value
	pos     int
	dst     []byte
	depth   int
	objects int      // objects open around pos
	keys    []byte   // unescaped member names that held escapes
	members []member // members of the open objects
	scratch []byte   // reorder buffer for one object at a time

	// Digest mode (Sum256): canonical text that no open object can still
	// reorder is written to h and dropped from dst as it completes.
	hashing bool
	h       hash.Hash
	buf     []byte // dst's backing array in digest mode
	sum     [32]byte
}

func (s *state) reset() {
	s.data, s.dst, s.pos, s.depth, s.objects, s.exact, s.hashing = nil, nil, 0, 0, 0, false, false
	s.keys = s.keys[:0]
	s.members = s.members[:0]
	s.scratch = s.scratch[:0]
	if cap(s.keys) > maxPooledBuf {
		s.keys = nil
	}
	if cap(s.scratch) > maxPooledBuf {
		s.scratch = nil
	}
	if cap(s.members) > maxPooledBuf/32 {
		s.members = nil
	}
	if cap(s.buf) > maxPooledBuf {
		s.buf = nil
	}
}

func (s *state) syntax(at int, msg string) error {
	return &SyntaxError{Offset: int64(at), Msg: msg}
}

func (s *state) fail(at int, err error) error {
	return &Error{Offset: int64(at), Err: err}
}

// run parses exactly one value surrounded by optional whitespace.
func (s *state) run() error {
	s.ws()
	if err := s.value(); err != nil {
		return err
	}
	s.flush()
	s.ws()
	if s.pos != len(s.data) {
		return s.syntax(s.pos, "unexpected data after top-level value")
	}
	return nil
}

// ws skips JSON whitespace (space, tab, LF, CR).
func (s *state) ws() {
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return // compact JSON: no whitespace here (inlined)
	}
	s.skipWS()
}

func (s *state) skipWS() {
	d, i := s.data, s.pos
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	s.pos = i
}

func (s *state) value() error {
	if s.pos >= len(s.data) {
		return s.syntax(s.pos, "unexpected end of input")
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		return s.str(nil)
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return s.number()
		}
		return s.syntax(s.pos, fmt.Sprintf("invalid character %q looking for beginning of value", c))
	}
}

func (s *state) literal(lit string) error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return s.syntax(s.pos, "invalid literal, expected "+lit)
	}
	s.dst = append(s.dst, lit...)
	s.pos += len(lit)
	return nil
}

func (s *state) enter() error {
	s.depth++
	if s.depth > MaxDepth {
		return s.fail(s.pos, ErrTooDeep)
	}
	return nil
}

// closeIf consumes c, the end of the array or object being read, when it
// is next, and reports whether it was.
func (s *state) closeIf(c byte) bool {
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		return false
	}
	s.pos++
	s.dst = append(s.dst, c)
	s.depth--
	return true
}

func (s *state) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '['
	s.dst = append(s.dst, '[')
	s.ws()
	if s.closeIf(']') {
		return nil
	}
	for {
		s.ws()
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntax(s.pos, "unexpected end of input in array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.dst = append(s.dst, ',')
			if s.hashing && s.objects == 0 && len(s.dst) >= flushSize {
				s.flush()
			}
		case ']':
			s.pos++
			s.dst = append(s.dst, ']')
			s.depth--
			return nil
		default:
			return s.syntax(s.pos, "expected ',' or ']' after array element")
		}
	}
}

func (s *state) object() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // '{'
	s.dst = append(s.dst, '{')
	body := len(s.dst)
	mBase, kBase := len(s.members), len(s.keys)
	s.ws()
	if s.closeIf('}') {
		return nil
	}
	s.objects++
	for {
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.syntax(s.pos, "expected string for object member name")
		}
		m := member{start: len(s.dst), at: s.pos}
		if err := s.str(&m); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.syntax(s.pos, "expected ':' after object member name")
		}
		s.pos++
		s.dst = append(s.dst, ':')
		s.ws()
		if err := s.value(); err != nil {
			return err
		}
		m.end = len(s.dst)
		s.members = append(s.members, m)
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntax(s.pos, "unexpected end of input in object")
		}
		if s.data[s.pos] == ',' {
			s.pos++
			s.dst = append(s.dst, ',')
			continue
		}
		if s.data[s.pos] != '}' {
			return s.syntax(s.pos, "expected ',' or '}' after object member")
		}
		s.pos++
		break
	}
	if err := s.order(body, s.members[mBase:]); err != nil {
		return err
	}
	s.objects--
	s.members = s.members[:mBase]
	s.keys = s.keys[:kBase]
	s.depth--
	return nil
}
