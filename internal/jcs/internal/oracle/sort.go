package oracle

import (
	"cmp"
	"slices"
	"unicode/utf8"
)

// order puts the members of one object, already written to s.dst[body:]
// separated by commas, into JCS order, and rejects duplicate names. Members
// that arrived sorted (the common case for machine-written JSON) are left
// where they are; otherwise the object's text is copied aside once and
// written back in sorted order.
func (s *state) order(body int, ms []member) error {
	sorted := true
	for i := 1; i < len(ms); i++ {
		c := CompareUTF16(s.key(ms[i-1]), s.key(ms[i]))
		if c == 0 {
			return s.fail(ms[i].at, ErrDuplicateKey)
		}
		if c > 0 {
			sorted = false
		}
	}
	if sorted {
		return nil
	}
	slices.SortFunc(ms, func(a, b member) int { return CompareUTF16(s.key(a), s.key(b)) })
	for i := 1; i < len(ms); i++ {
		if CompareUTF16(s.key(ms[i-1]), s.key(ms[i])) == 0 {
			return s.fail(max(ms[i-1].at, ms[i].at), ErrDuplicateKey)
		}
	}
	s.scratch = append(s.scratch[:0], s.dst[body:]...)
	s.dst = s.dst[:body]
	for i, m := range ms {
		if i > 0 {
			s.dst = append(s.dst, ',')
		}
		s.dst = append(s.dst, s.scratch[m.start-body:m.end-body]...)
	}
	return nil
}

func (s *state) key(m member) []byte { return s.keys[m.kOff:m.kEnd] }

// CompareUTF16 compares two UTF-8 strings as sequences of UTF-16 code
// units, the member order of RFC 8785 §3.2.3 (and of JavaScript's default
// sort). It differs from byte order only where a supplementary-plane
// character (U+10000 and above, a surrogate pair in UTF-16) meets one of
// U+E000..U+FFFF: the pair sorts first. It returns -1, 0 or +1. For invalid
// UTF-8 the order is still total and deterministic, but unspecified.
func CompareUTF16[T ~string | ~[]byte](a, b T) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return cmp.Compare(len(a), len(b))
	}
	// Back up to the start of the character holding the first difference;
	// the prefix is shared, so it starts at the same offset in both.
	j := i
	for j > 0 && i-j < 3 && a[j]&0xC0 == 0x80 {
		j--
	}
	ua, oka := utf16Units(a, j)
	ub, okb := utf16Units(b, j)
	if !oka || !okb {
		return cmp.Compare(a[i], b[i]) // invalid UTF-8: byte order
	}
	return cmp.Compare(ua, ub)
}

// utf16Units decodes the character at s[i:] and packs its UTF-16 encoding
// into a number that orders like the code-unit sequence: a BMP character is
// (unit << 16), a supplementary one is (high << 16 | low). ok is false when
// s[i:] does not start with a valid UTF-8 sequence.
func utf16Units[T ~string | ~[]byte](s T, i int) (units uint32, ok bool) {
	var buf [utf8.UTFMax]byte
	k := copy(buf[:], s[i:min(len(s), i+utf8.UTFMax)])
	r, size := utf8.DecodeRune(buf[:k])
	if r == utf8.RuneError && size <= 1 {
		return 0, false
	}
	if r < 0x10000 {
		return uint32(r) << 16, true
	}
	r -= 0x10000
	return uint32(0xD800+(r>>10))<<16 | uint32(0xDC00+(r&0x3FF)), true
}
