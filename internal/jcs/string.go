package jcs

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// plain[c] is true for the ASCII bytes that stand for themselves both in a
// JSON string and in its JCS form: printable, not '"', not '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strVerbatim continues reading the string whose first byte that is not
// plain (see plain) is d[i]. When the string is valid UTF-8 without
// escapes or control characters, it is its own JCS form: strVerbatim
// returns the offset after its closing quote and true. Otherwise it
// returns the offset of the first backslash or control character (or
// len(d)) and false, for strRest to take over, or ErrInvalidUTF8.
func (s *state) strVerbatim(i int) (int, bool, error) {
	d := s.data
	for i < len(d) {
		c := d[i]
		if c == '"' {
			return i + 1, true, nil
		}
		if c < utf8.RuneSelf {
			return i, false, nil // '\\' or a control character
		}
		if c >= 0xC2 && c <= 0xDF && i+1 < len(d) && d[i+1]&0xC0 == 0x80 {
			i = plainRun(d, i+2) // a valid two-byte sequence (Latin, Greek, Cyrillic ...)
			continue
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			return i, false, s.fail(i, ErrInvalidUTF8)
		}
		i = plainRun(d, i+size)
	}
	return i, false, nil
}

// strEscaped finishes a string value (not a member name) at d[i], its
// first escape or control character, keeping the pending run of the parse
// loop (see parse): an escape that is its own JCS form (\" \\ \b \f \n
// \r \t) stays in the run; any other ends it, and its JCS form is
// written to dst. It returns dst, the new start of the run and the offset
// after the string, or the error strRest would report.
func (s *state) strEscaped(dst []byte, run, i int) ([]byte, int, int, error) {
	d := s.data
	for {
		if i >= len(d) {
			return dst, run, i, s.syntax(len(d), "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			return dst, run, i + 1, nil
		case c == '\\':
			if i+1 < len(d) && d[i+1] != '/' && d[i+1] != 'u' && simpleEscapes[d[i+1]] != 0 {
				i = plainRun(d, i+2)
				continue
			}
			r, next, err := s.escape(i)
			if err != nil {
				return dst, run, i, err
			}
			dst = appendRune(append(dst, d[run:i]...), r)
			run = next
			i = plainRun(d, next)
		case c < 0x20:
			return dst, run, i, s.syntax(i, "control character in string (must be escaped)")
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, run, i, s.fail(i, ErrInvalidUTF8)
			}
			i = plainRun(d, i+size)
		}
	}
}

// strRest appends the JCS form of the string whose text starts at
// d[start] (after the opening quote) to dst, and returns dst and the
// offset after the string; d[i] is the first byte that is not plain. For
// a member name (m not nil) it records in m where the unescaped name is:
// in the input itself when the name has no escapes, else appended to
// s.keys.
func (s *state) strRest(dst []byte, m *member, start, i int) ([]byte, int, error) {
	d := s.data
	for {
		if i >= len(d) {
			return dst, i, s.syntax(len(d), "unterminated string")
		}
		c := d[i]
		if c == '"' {
			if m != nil {
				m.kOff, m.kEnd = start, i
			}
			return append(dst, d[start-1:i+1]...), i + 1, nil
		}
		if c < utf8.RuneSelf {
			break // '\\' or a control character
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			return dst, i, s.fail(i, ErrInvalidUTF8)
		}
		i = plainRun(d, i+size)
	}
	// Slow path: flush the verbatim prefix, then go token by token.
	dst = append(dst, d[start-1:i]...)
	key := m != nil
	if key {
		m.esc = true
		m.kOff = len(s.keys)
		s.keys = append(s.keys, d[start:i]...)
	}
	for {
		run := i
		i = plainRun(d, i)
		if i > run {
			dst = append(dst, d[run:i]...)
			if key {
				s.keys = append(s.keys, d[run:i]...)
			}
		}
		if i >= len(d) {
			return dst, i, s.syntax(len(d), "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			if key {
				m.kEnd = len(s.keys)
			}
			return append(dst, '"'), i + 1, nil
		case c == '\\':
			r, next, err := s.escape(i)
			if err != nil {
				return dst, i, err
			}
			dst = appendRune(dst, r)
			if key {
				s.keys = utf8.AppendRune(s.keys, r)
			}
			i = next
		case c < 0x20:
			return dst, i, s.syntax(i, "control character in string (must be escaped)")
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, i, s.fail(i, ErrInvalidUTF8)
			}
			dst = append(dst, d[i:i+size]...)
			if key {
				s.keys = append(s.keys, d[i:i+size]...)
			}
			i += size
		}
	}
}

const (
	lsb = 0x0101010101010101 // the low bit of every byte of a word
	msb = 0x8080808080808080 // the high bit of every byte of a word
)

// plainRun returns the offset of the first byte at or after i that is not
// plain (see plain), or len(d). It tests eight bytes per step: a byte is
// not plain when its high bit is set, it is below 0x20, or it equals '"' or
// '\\' (the usual "has a zero byte" bit trick). A borrow can only mark a
// byte above one that is itself not plain, so the lowest marked byte is
// the answer.
func plainRun(d []byte, i int) int {
	for i+8 <= len(d) {
		if special := notPlain(binary.LittleEndian.Uint64(d[i:])); special != 0 {
			return i + bits.TrailingZeros64(special)>>3
		}
		i += 8
	}
	for i < len(d) && plain[d[i]] {
		i++
	}
	return i
}

// notPlain marks the high bit of every byte of w (little-endian) that is
// not plain, and possibly of bytes above the lowest one marked.
func notPlain(w uint64) uint64 {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return (w | ((w - lsb*0x20) &^ w) | ((q - lsb) &^ q) | ((b - lsb) &^ b)) & msb
}

// simpleEscapes maps the byte after a backslash to the rune the escape
// stands for, for every escape but \u (0: not one of them).
var simpleEscapes = [256]rune{
	'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

// escape decodes the escape sequence at d[i] ('\\'), joining a surrogate
// pair into one rune, and returns the rune and the offset after it.
func (s *state) escape(i int) (rune, int, error) {
	d := s.data
	if i+1 >= len(d) {
		return 0, 0, s.syntax(len(d), "unterminated escape sequence")
	}
	if r := simpleEscapes[d[i+1]]; r != 0 {
		return r, i + 2, nil
	}
	if d[i+1] != 'u' {
		return 0, 0, s.syntax(i, "invalid escape sequence")
	}
	r, ok := hex4(d, i+2)
	if !ok {
		return 0, 0, s.syntax(i, "invalid \\u escape (want 4 hex digits)")
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, 0, s.fail(i, ErrLoneSurrogate)
	case r >= 0xD800 && r <= 0xDBFF:
		if i+7 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' {
			lo, ok := hex4(d, i+8)
			if !ok {
				return 0, 0, s.syntax(i+6, "invalid \\u escape (want 4 hex digits)")
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), i + 12, nil
			}
		}
		return 0, 0, s.fail(i, ErrLoneSurrogate)
	}
	return r, i + 6, nil
}

// hex4 reads four hex digits at d[i:].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// shortEscapes maps each rune written as a two-character escape to the
// character after the backslash (0: not one of them).
var shortEscapes = [0x5D]byte{
	'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't',
}

// appendRune appends r in its JCS string form (RFC 8785 §3.2.2.2): the two
// mandatory escapes, the short control escapes, \u00xx for the remaining
// controls, raw UTF-8 for everything else.
func appendRune(dst []byte, r rune) []byte {
	if r < rune(len(shortEscapes)) && shortEscapes[r] != 0 {
		return append(dst, '\\', shortEscapes[r])
	}
	if r < 0x20 {
		return append(dst, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	}
	return utf8.AppendRune(dst, r)
}

// AppendString appends s as a JCS string literal (quotes included). Invalid
// UTF-8 is rejected with ErrInvalidUTF8; s is written without any Unicode
// normalisation.
func AppendString(dst []byte, s string) ([]byte, error) {
	if !utf8.ValidString(s) {
		return dst, ErrInvalidUTF8
	}
	dst = append(dst, '"')
	for _, r := range s {
		dst = appendRune(dst, r)
	}
	return append(dst, '"'), nil
}
