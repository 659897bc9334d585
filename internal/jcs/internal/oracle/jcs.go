package oracle

import (
	"bytes"
	"crypto/sha256"
	"fmt"
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

// Sum256Exact is Sum256 with the number check of CanonicalizeExact.
func Sum256Exact(data []byte) ([sha256.Size]byte, error) {
	return sum256(data, true)
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

// Sum256 returns the SHA-256 of the canonical form of data, the Layer-1
// request-body fingerprint. It reuses pooled buffers, so it does not
// allocate in the steady state.
func Sum256(data []byte) ([sha256.Size]byte, error) {
	return sum256(data, false)
}

func sum256(data []byte, exact bool) ([sha256.Size]byte, error) {
	bp := bufPool.Get().(*[]byte)
	out, err := appendMode((*bp)[:0], data, exact)
	var sum [sha256.Size]byte
	if err == nil {
		sum = sha256.Sum256(out)
	}
	if cap(out) <= maxPooledBuf {
		*bp = out[:0]
		bufPool.Put(bp)
	}
	return sum, err
}

const maxPooledBuf = 4 << 20

var (
	statePool = sync.Pool{New: func() any { return new(state) }}
	bufPool   = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
)

// member is one object member while its object is being written: the
// unescaped name is keys[kOff:kEnd]; the canonical `"name":value` text is
// dst[start:end] (no comma); at is the name's offset in the input.
type member struct {
	kOff, kEnd int
	start, end int
	at         int
}

// state is one canonicalisation in progress. Its scratch slices (keys,
// members, scratch) are stacks shared by all nesting levels and are kept
// across calls through statePool.
type state struct {
	data    []byte
	exact   bool // reject numbers whose canonical form changes their value
	pos     int
	dst     []byte
	depth   int
	keys    []byte   // unescaped member names of the open objects
	members []member // members of the open objects
	scratch []byte   // reorder buffer for one object at a time
}

func (s *state) reset() {
	s.data, s.dst, s.pos, s.depth, s.exact = nil, nil, 0, 0, false
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
	s.ws()
	if s.pos != len(s.data) {
		return s.syntax(s.pos, "unexpected data after top-level value")
	}
	return nil
}

// ws skips JSON whitespace (space, tab, LF, CR).
func (s *state) ws() {
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
		return s.str(false)
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
	for {
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.syntax(s.pos, "expected string for object member name")
		}
		m := member{kOff: len(s.keys), start: len(s.dst), at: s.pos}
		if err := s.str(true); err != nil {
			return err
		}
		m.kEnd = len(s.keys)
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
	s.dst = append(s.dst, '}')
	s.members = s.members[:mBase]
	s.keys = s.keys[:kBase]
	s.depth--
	return nil
}
