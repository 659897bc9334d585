package oracle

import "unicode/utf8"

// plain[c] is true for the ASCII bytes that stand for themselves both in a
// JSON string and in its JCS form: printable, not '"', not '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str parses the JSON string at s.pos (the opening quote) and appends its
// JCS form to s.dst. When key is set it also appends the unescaped UTF-8
// text to s.keys, for sorting and duplicate detection.
//
// Fast path: a string without escapes whose UTF-8 is valid is already
// canonical and is copied in one piece.
func (s *state) str(key bool) error {
	d := s.data
	start := s.pos + 1
	i := start
	for {
		for i < len(d) && plain[d[i]] {
			i++
		}
		if i >= len(d) {
			return s.syntax(len(d), "unterminated string")
		}
		c := d[i]
		if c == '"' {
			s.dst = append(s.dst, d[start-1:i+1]...)
			if key {
				s.keys = append(s.keys, d[start:i]...)
			}
			s.pos = i + 1
			return nil
		}
		if c < utf8.RuneSelf {
			break // '\\' or a control character
		}
		r, size := utf8.DecodeRune(d[i:])
		if r == utf8.RuneError && size == 1 {
			return s.fail(i, ErrInvalidUTF8)
		}
		i += size
	}
	// Slow path: flush the verbatim prefix, then go token by token.
	s.dst = append(s.dst, d[start-1:i]...)
	if key {
		s.keys = append(s.keys, d[start:i]...)
	}
	for {
		run := i
		for i < len(d) && plain[d[i]] {
			i++
		}
		if i > run {
			s.dst = append(s.dst, d[run:i]...)
			if key {
				s.keys = append(s.keys, d[run:i]...)
			}
		}
		if i >= len(d) {
			return s.syntax(len(d), "unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			s.dst = append(s.dst, '"')
			s.pos = i + 1
			return nil
		case c == '\\':
			r, next, err := s.escape(i)
			if err != nil {
				return err
			}
			s.dst = appendRune(s.dst, r)
			if key {
				s.keys = utf8.AppendRune(s.keys, r)
			}
			i = next
		case c < 0x20:
			return s.syntax(i, "control character in string (must be escaped)")
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return s.fail(i, ErrInvalidUTF8)
			}
			s.dst = append(s.dst, d[i:i+size]...)
			if key {
				s.keys = append(s.keys, d[i:i+size]...)
			}
			i += size
		}
	}
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
