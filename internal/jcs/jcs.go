package jcs

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/bits"
	"reflect"
	"slices"
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
// `"name":value` text is [start, end) of the canonical text (no comma; an
// offset in dst followed by the pending input, see parse); at is the
// name's offset in the input.
type member struct {
	kOff, kEnd int
	start, end int
	at         int
	pre        uint64 // keyPrefix of the name
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
	// same and hashed: everything hashed so far is data[:hashed] itself
	// (track), so far as same is true.
	same   bool
	hashed int
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
// object, body is the offset in the canonical text after its '{', and
// mBase and kBase the heights of the member stack and s.keys when it
// opened.
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
// appends its canonical form to s.dst (in digest mode: hashes it). It is
// one loop over the input with an explicit stack of open containers, not a
// recursive descent: the input offset and the output stay in registers
// from token to token.
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
	ms := s.members[:0]
	// The canonical text so far is dst followed by d[run:i]: input that is
	// already canonical is not copied token by token but in one piece, when
	// something that is not (whitespace, an escape, a rewritten number, a
	// reordered object) follows it. An offset in the canonical text (out)
	// is therefore len(dst) + i - run, and it does not change when the
	// pending input is copied.
	run := i

value: // a value starts at d[i]
	if i >= len(d) {
		return s.end(dst, frames, ms, s.syntax(i, "unexpected end of input"))
	}
	switch c := d[i]; {
	case c == '"':
		// A string of plain bytes, or of valid UTF-8 without escapes, is
		// its own canonical form.
		// Scanned inline, as a member name is: through one shared call the digest took ~3 % more CPU.
		j := i + 1
		if j+8 <= len(d) {
			if m := notPlain(binary.LittleEndian.Uint64(d[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
			} else {
				j = plainRun(d, j+8)
			}
		} else {
			j = plainRun(d, j)
		}
		if j < len(d) && d[j] == '"' {
			i = j + 1
			break
		}
		if j < len(d) && d[j] == '\\' {
			if dst, run, i, err = s.strEscaped(dst, run, j); err != nil {
				return s.end(dst, frames, ms, err)
			}
			break
		}
		var verbatim bool
		if j, verbatim, err = s.strVerbatim(j); err != nil {
			return s.end(dst, frames, ms, err)
		}
		if verbatim {
			i = j
			break
		}
		if dst, run, i, err = s.strEscaped(dst, run, j); err != nil {
			return s.end(dst, frames, ms, err)
		}
	case c-'0' < 10 || c == '-':
		// An integer of at most 15 digits, the common case, inline.
		j := i
		if c == '-' {
			j++
		}
		k := j
		for k < len(d) && d[k]-'0' < 10 {
			k++
		}
		if n := k - j; n > 0 && n <= 15 && (d[j] != '0' || n == 1 && j == i) &&
			(k >= len(d) || d[k] != '.' && d[k]|0x20 != 'e') {
			i = k
			break
		}
		if j, ok := numberVerbatim(d, i); ok {
			i = j
			break
		}
		dst = append(dst, d[run:i]...)
		if dst, i, err = s.number(dst, i); err != nil {
			return s.end(dst, frames, ms, err)
		}
		run = i
	case c == '{' || c == '[':
		if len(frames) >= MaxDepth {
			return s.end(dst, frames, ms, s.fail(i, ErrTooDeep))
		}
		i++
		if i < len(d) && d[i] <= ' ' {
			dst = append(dst, d[run:i]...)
			i = skipWS(d, i)
			run = i
		}
		if i < len(d) && d[i] == c+2 { // empty: '{'+2 is '}', '['+2 is ']'
			i++
			break
		}
		if c == '[' {
			frames = pushFrame(frames, false, 0, 0, 0)
			goto value
		}
		frames = pushFrame(frames, true, len(dst)+i-run, len(ms), len(s.keys))
		s.objects++
		goto member
	case c == 't':
		if len(d)-i < 4 || string(d[i:i+4]) != "true" {
			return s.end(dst, frames, ms, s.syntax(i, "invalid literal, expected true"))
		}
		i += 4
	case c == 'f':
		if len(d)-i < 5 || string(d[i:i+5]) != "false" {
			return s.end(dst, frames, ms, s.syntax(i, "invalid literal, expected false"))
		}
		i += 5
	case c == 'n':
		if len(d)-i < 4 || string(d[i:i+4]) != "null" {
			return s.end(dst, frames, ms, s.syntax(i, "invalid literal, expected null"))
		}
		i += 4
	default:
		return s.end(dst, frames, ms, s.syntax(i, fmt.Sprintf("invalid character %q looking for beginning of value", c)))
	}

after: // a value ended before d[i]
	if i < len(d) && d[i] <= ' ' {
		dst = append(dst, d[run:i]...)
		i = skipWS(d, i)
		run = i
	}
	if len(frames) == 0 {
		if i != len(d) {
			return s.end(dst, frames, ms, s.syntax(i, "unexpected data after top-level value"))
		}
		if s.hashing {
			s.flush(dst)
			s.flush(d[run:i])
			return s.end(dst[:0], frames, ms, nil)
		}
		return s.end(append(dst, d[run:i]...), frames, ms, nil)
	}
	if f := &frames[len(frames)-1]; f.object {
		// The member being read is the last in ms: the members of any
		// object inside its value are gone again.
		ms[len(ms)-1].end = len(dst) + i - run
		if i >= len(d) {
			return s.end(dst, frames, ms, s.syntax(i, "unexpected end of input in object"))
		}
		if d[i] == ',' {
			i++
			goto member
		}
		if d[i] != '}' {
			return s.end(dst, frames, ms, s.syntax(i, "expected ',' or '}' after object member"))
		}
		var moved bool
		if dst, moved, err = s.order(dst, d[run:i], f.body, ms[f.mBase:]); err != nil {
			return s.end(dst, frames, ms, err)
		}
		if moved { // dst holds the object up to its '}'
			run = i
		}
		i++
		s.objects--
		ms = ms[:f.mBase]
		s.keys = s.keys[:f.kBase]
		frames = frames[:len(frames)-1]
		goto after
	}
	if i >= len(d) {
		return s.end(dst, frames, ms, s.syntax(i, "unexpected end of input in array"))
	}
	switch d[i] {
	case ',':
		i++
		if s.hashing && s.objects == 0 && len(dst)+i-run >= flushSize {
			// Nothing before this comma can move any more.
			s.flush(dst)
			s.flush(d[run:i])
			dst, run = dst[:0], i
		}
		if i < len(d) && d[i] <= ' ' {
			dst = append(dst, d[run:i]...)
			i = skipWS(d, i)
			run = i
		}
		goto value
	case ']':
		i++
		frames = frames[:len(frames)-1]
		goto after
	}
	return s.end(dst, frames, ms, s.syntax(i, "expected ',' or ']' after array element"))

member: // an object member's name is expected at or after d[i]
	if i < len(d) && d[i] <= ' ' {
		dst = append(dst, d[run:i]...)
		i = skipWS(d, i)
		run = i
	}
	if i >= len(d) || d[i] != '"' {
		return s.end(dst, frames, ms, s.syntax(i, "expected string for object member name"))
	}
	j := i + 1 // scanned inline, as a string value (see there)
	if j+8 <= len(d) {
		w := binary.LittleEndian.Uint64(d[j:])
		if m := notPlain(w); m != 0 {
			// The first byte that is not plain is d[j+b/8].
			b := uint(bits.TrailingZeros64(m)) - 7
			j += int(b >> 3)
			if byte(w>>(b&63)) == '"' {
				// A plain ASCII name of at most seven bytes, the common
				// case: the word just scanned is its prefix (see below).
				ms = pushMember(ms, i+1, j, len(dst)+i-run, i, bits.ReverseBytes64(w)&^(^uint64(0)>>(b&63)))
				i = j + 1
				goto colon
			}
		} else {
			j = plainRun(d, j+8)
		}
	} else {
		j = plainRun(d, j)
	}
	if j < len(d) && d[j] == '"' {
		// The name is plain ASCII, which ranks as itself: its prefix is
		// its first eight bytes, big-endian, the bytes after it masked.
		var pre uint64
		if i+9 <= len(d) {
			pre = bits.ReverseBytes64(binary.LittleEndian.Uint64(d[i+1:])) & (^uint64(0) << (8 * (8 - min(j-i-1, 8))))
		} else {
			pre = keyPrefix(d[i+1 : j])
		}
		ms = pushMember(ms, i+1, j, len(dst)+i-run, i, pre)
		i = j + 1
	} else {
		k, verbatim, err := s.strVerbatim(j)
		if err != nil {
			return s.end(dst, frames, ms, err)
		}
		if verbatim {
			ms = pushMember(ms, i+1, k-1, len(dst)+i-run, i, keyPrefix(d[i+1:k-1]))
			i = k
		} else {
			dst = append(dst, d[run:i]...)
			ms = pushMember(ms, 0, 0, len(dst), i, 0)
			m := &ms[len(ms)-1]
			if dst, i, err = s.strRest(dst, m, i+1, j); err != nil {
				return s.end(dst, frames, ms, err)
			}
			m.pre = keyPrefix(s.key(m))
			run = i
		}
	}
colon: // a member name ended before d[i]
	if i < len(d) && d[i] <= ' ' {
		dst = append(dst, d[run:i]...)
		i = skipWS(d, i)
		run = i
	}
	if i >= len(d) || d[i] != ':' {
		return s.end(dst, frames, ms, s.syntax(i, "expected ':' after object member name"))
	}
	i++
	if i < len(d) && d[i] <= ' ' {
		dst = append(dst, d[run:i]...)
		i = skipWS(d, i)
		run = i
	}
	goto value
}

// pushMember appends a member record, field by field: appending a
// composite literal builds it on the stack and copies it with wide loads
// that cannot be forwarded from the narrow stores, which stalled the loop
// (a third of its time, measured).
func pushMember(ms []member, kOff, kEnd, start, at int, pre uint64) []member {
	if len(ms) == cap(ms) {
		ms = growMembers(ms)
	}
	ms = ms[:len(ms)+1]
	m := &ms[len(ms)-1]
	m.kOff, m.kEnd, m.start, m.end, m.at, m.esc, m.pre = kOff, kEnd, start, start, at, false, pre
	return ms
}

//go:noinline
func growMembers(ms []member) []member { return slices.Grow(ms, 1) }

// pushFrame appends a frame record, field by field (see pushMember).
func pushFrame(frames []frame, object bool, body, mBase, kBase int) []frame {
	if len(frames) == cap(frames) {
		frames = slices.Grow(frames, 1)
	}
	frames = frames[:len(frames)+1]
	f := &frames[len(frames)-1]
	f.object, f.body, f.mBase, f.kBase = object, body, mBase, kBase
	return frames
}

// end keeps the grown stacks of a finished parse for the next one.
func (s *state) end(dst []byte, frames []frame, ms []member, err error) ([]byte, error) {
	s.frames, s.members = frames[:0], ms[:0]
	return dst, err
}
