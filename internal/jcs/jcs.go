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
	dst     []byte
	objects int      // objects open at the current offset
	keys    []byte   // unescaped member names that held escapes
	members []member // members of the open objects
	scratch []byte   // reorder buffer for one object at a time
	frames  []frame  // open arrays and objects (run)

	// Digest mode (Sum256): canonical text that no open object can still
	// reorder is written to h and dropped from dst as it completes.
	hashing bool
	h       hash.Hash
	buf     []byte // dst's backing array in digest mode
	sum     [32]byte
}

func (s *state) reset() {
	s.data, s.dst, s.objects, s.exact, s.hashing = nil, nil, 0, false, false
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
	if cap(s.frames) > MaxDepth {
		s.frames = nil
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

// frame is one open array or object while run reads its contents. For an
// object, body is the offset in dst after its '{', and mBase and kBase the
// heights of s.members and s.keys when it opened.
type frame struct {
	object       bool
	body         int
	mBase, kBase int
}

// skipWS returns the offset of the first byte at or after i that is not
// JSON whitespace (space, tab, LF, CR).
func skipWS(d []byte, i int) int {
	for i < len(d) && d[i] <= ' ' && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// run parses exactly one value surrounded by optional whitespace and
// appends its canonical form to s.dst. It is one loop over the input with
// an explicit stack of open containers (s.frames), not a recursive
// descent: the input offset and the output stay in registers from token to
// token.
func (s *state) run() error {
	dst, err := s.parse(s.dst)
	s.dst = dst
	return err
}

func (s *state) parse(dst []byte) ([]byte, error) {
	d := s.data
	i := skipWS(d, 0)
	var err error
	frames := s.frames[:0]
	defer func() { s.frames = frames[:0] }()

value: // a value starts at d[i]
	if i >= len(d) {
		return dst, s.syntax(i, "unexpected end of input")
	}
	switch c := d[i]; c {
	case '"':
		if dst, i, err = s.str(dst, i, nil); err != nil {
			return dst, err
		}
	case '{':
		if len(frames) >= MaxDepth {
			return dst, s.fail(i, ErrTooDeep)
		}
		dst = append(dst, '{')
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == '}' {
			dst = append(dst, '}')
			i++
			break
		}
		frames = append(frames, frame{object: true, body: len(dst), mBase: len(s.members), kBase: len(s.keys)})
		s.objects++
		goto member
	case '[':
		if len(frames) >= MaxDepth {
			return dst, s.fail(i, ErrTooDeep)
		}
		dst = append(dst, '[')
		i = skipWS(d, i+1)
		if i < len(d) && d[i] == ']' {
			dst = append(dst, ']')
			i++
			break
		}
		frames = append(frames, frame{})
		goto value
	case 't':
		if dst, i, err = s.literal(dst, i, "true"); err != nil {
			return dst, err
		}
	case 'f':
		if dst, i, err = s.literal(dst, i, "false"); err != nil {
			return dst, err
		}
	case 'n':
		if dst, i, err = s.literal(dst, i, "null"); err != nil {
			return dst, err
		}
	default:
		if c != '-' && (c < '0' || c > '9') {
			return dst, s.syntax(i, fmt.Sprintf("invalid character %q looking for beginning of value", c))
		}
		if dst, i, err = s.number(dst, i); err != nil {
			return dst, err
		}
	}

after: // a value ended before d[i]
	if len(frames) == 0 {
		s.flush(dst)
		if s.hashing {
			dst = dst[:0]
		}
		if i = skipWS(d, i); i != len(d) {
			return dst, s.syntax(i, "unexpected data after top-level value")
		}
		return dst, nil
	}
	i = skipWS(d, i)
	if f := &frames[len(frames)-1]; f.object {
		// The member being read is the last in s.members: the members of
		// any object inside its value are gone again.
		s.members[len(s.members)-1].end = len(dst)
		if i >= len(d) {
			return dst, s.syntax(i, "unexpected end of input in object")
		}
		if d[i] == ',' {
			dst = append(dst, ',')
			i++
			goto member
		}
		if d[i] != '}' {
			return dst, s.syntax(i, "expected ',' or '}' after object member")
		}
		i++
		if dst, err = s.order(dst, f.body, s.members[f.mBase:]); err != nil {
			return dst, err
		}
		s.objects--
		s.members = s.members[:f.mBase]
		s.keys = s.keys[:f.kBase]
		frames = frames[:len(frames)-1]
		goto after
	}
	if i >= len(d) {
		return dst, s.syntax(i, "unexpected end of input in array")
	}
	switch d[i] {
	case ',':
		dst = append(dst, ',')
		if s.hashing && s.objects == 0 && len(dst) >= flushSize {
			s.flush(dst)
			dst = dst[:0]
		}
		i = skipWS(d, i+1)
		goto value
	case ']':
		dst = append(dst, ']')
		i++
		frames = frames[:len(frames)-1]
		goto after
	}
	return dst, s.syntax(i, "expected ',' or ']' after array element")

member: // an object member's name is expected at or after d[i]
	i = skipWS(d, i)
	if i >= len(d) || d[i] != '"' {
		return dst, s.syntax(i, "expected string for object member name")
	}
	s.members = append(s.members, member{start: len(dst), at: i})
	if dst, i, err = s.str(dst, i, &s.members[len(s.members)-1]); err != nil {
		return dst, err
	}
	i = skipWS(d, i)
	if i >= len(d) || d[i] != ':' {
		return dst, s.syntax(i, "expected ':' after object member name")
	}
	dst = append(dst, ':')
	i = skipWS(d, i+1)
	goto value
}

func (s *state) literal(dst []byte, i int, lit string) ([]byte, int, error) {
	if !bytes.HasPrefix(s.data[i:], []byte(lit)) {
		return dst, i, s.syntax(i, "invalid literal, expected "+lit)
	}
	return append(dst, lit...), i + len(lit), nil
}
