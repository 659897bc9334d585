package jcs

import (
	"slices"
)

// order finishes one object whose members are written to the canonical
// text from offset body on, separated by commas: the text is dst followed
// by pending (input not yet copied). It rejects duplicate names and puts
// the members in JCS order. Members that arrived sorted (the common case
// for machine-written JSON) stay where they are and order returns dst
// unchanged with moved false. Otherwise only the small member records are
// sorted and the members' text is moved once, and order returns moved true
// with the object's text, up to its '}' (not included), in dst. Members
// before the first one out of place stay where they are; of the rest:
//
//   - when their text is all pending (canonical apart from its order) it
//     is copied from the input member by member, in order;
//   - the outermost object in digest mode is hashed in place, in sorted
//     order, and dropped (nothing before it or in it can move any more);
//   - otherwise their text is copied aside and written back in order.
func (s *state) order(dst, pending []byte, body int, ms []member) ([]byte, bool, error) {
	// Insertion sort, which also finds duplicate names: n-1 comparisons
	// for members that arrived sorted, plus one per inversion otherwise
	// (objects are small; larger ones use pdqsort). It sorts the names'
	// first eight bytes as integers, in an order that agrees with
	// CompareUTF16, with the members' indexes, and compares whole names
	// only where those are equal: sorting the member records themselves
	// cost a fifth of the run on objects of eight unsorted members.
	sorted := true
	// perm is the sorted order of a small object's members (ms[perm[k]]
	// is the k-th), nil when ms itself is in order.
	var perm []uint8
	var idx [maxSmallObject]uint8
	if len(ms) > maxSmallObject {
		var dup bool
		if sorted, dup = s.sortLarge(ms); dup {
			return dst, false, s.duplicate(ms)
		}
	} else {
		var pre [maxSmallObject]uint64
		for k := range ms {
			pre[k], idx[k] = ms[k].pre, uint8(k)
		}
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0; j-- {
				if pre[j-1] < pre[j] {
					break
				}
				if pre[j-1] == pre[j] {
					c := CompareUTF16(s.key(&ms[idx[j-1]]), s.key(&ms[idx[j]]))
					if c == 0 {
						return dst, false, s.duplicate(ms)
					}
					if c < 0 {
						break
					}
				}
				pre[j-1], pre[j] = pre[j], pre[j-1]
				idx[j-1], idx[j] = idx[j], idx[j-1]
				sorted = false
			}
		}
		// The members are written in the order of idx, not moved there:
		// copying the records read them with wide loads just after the
		// parse wrote them field by field, which stalled (see pushMember).
		perm = idx[:len(ms)]
	}
	if sorted {
		return dst, false, nil
	}
	// Members before the first one out of place (k0) stay where they are,
	// the comma after them included: only the rest, from offset from on,
	// is written again.
	k0, from := 0, body
	if perm != nil {
		for perm[k0] == uint8(k0) {
			k0++
		}
		from = ms[k0].start
	}
	if n := len(dst); from >= n {
		dst = append(dst, pending[:from-n]...)
		for k := k0; k < len(ms); k++ {
			m := memberAt(ms, perm, k)
			a := m.start - n
			if k > k0 {
				// A member other than an object's first is preceded by
				// its comma in the pending text: copied with it.
				if a > 0 && pending[a-1] == ',' {
					a--
				} else {
					dst = append(dst, ',')
				}
			}
			dst = append(dst, pending[a:m.end-n]...)
		}
		return dst, true, nil
	}
	dst = append(dst, pending...)
	if s.hashing && s.objects == 1 {
		s.same = false // the members are hashed in another order
		s.h.Write(dst[:body])
		for k := range ms {
			if k > 0 {
				s.h.Write(comma)
			}
			m := memberAt(ms, perm, k)
			s.h.Write(dst[m.start:m.end])
		}
		return dst[:0], true, nil
	}
	s.scratch = append(s.scratch[:0], dst[from:]...)
	dst = dst[:from]
	for k := k0; k < len(ms); k++ {
		if k > k0 {
			dst = append(dst, ',')
		}
		m := memberAt(ms, perm, k)
		dst = append(dst, s.scratch[m.start-from:m.end-from]...)
	}
	return dst, true, nil
}

// memberAt returns the k-th member of ms in the order perm (ms's own
// order when perm is nil).
func memberAt(ms []member, perm []uint8, k int) *member {
	if perm != nil {
		return &ms[perm[k]]
	}
	return &ms[k]
}

// maxSmallObject is the most members order sorts by insertion.
const maxSmallObject = 12

// keyPrefix returns the first eight bytes of name as an integer (zeros
// past its end), each byte replaced by its utf16Rank, so that two names
// whose prefixes differ compare as their prefixes do under CompareUTF16.
func keyPrefix(name []byte) uint64 {
	n := min(len(name), 8)
	var p uint64
	for _, c := range name[:n] {
		p = p<<8 | uint64(utf16Rank[c])
	}
	return p << (8 * (8 - n))
}

// sortLarge sorts the members of an object of more than a dozen members.
// It reports whether they were already sorted, and whether two share a
// name.
func (s *state) sortLarge(ms []member) (sorted, dup bool) {
	sorted = true
	for i := 1; i < len(ms); i++ {
		if CompareUTF16(s.key(&ms[i-1]), s.key(&ms[i])) >= 0 {
			sorted = false
			break
		}
	}
	if sorted {
		return true, false
	}
	slices.SortFunc(ms, func(a, b member) int { return CompareUTF16(s.key(&a), s.key(&b)) })
	for i := 1; i < len(ms); i++ {
		if CompareUTF16(s.key(&ms[i-1]), s.key(&ms[i])) == 0 {
			return false, true
		}
	}
	return false, false
}

// duplicate returns the ErrDuplicateKey error for an object with two
// members of the same name (ms in any order), at the offset the package
// has always reported: the later of the first two members adjacent in
// input order that share a name, or, when no two adjacent ones do, the
// later of the first two equal neighbours after sorting.
func (s *state) duplicate(ms []member) error {
	slices.SortFunc(ms, func(a, b member) int { return a.at - b.at }) // input order
	for i := 1; i < len(ms); i++ {
		if CompareUTF16(s.key(&ms[i-1]), s.key(&ms[i])) == 0 {
			return s.fail(ms[i].at, ErrDuplicateKey)
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return CompareUTF16(s.key(&a), s.key(&b)) })
	for i := 1; i < len(ms); i++ {
		if CompareUTF16(s.key(&ms[i-1]), s.key(&ms[i])) == 0 {
			return s.fail(max(ms[i-1].at, ms[i].at), ErrDuplicateKey)
		}
	}
	return s.fail(ms[0].at, ErrDuplicateKey) // not reached: ms holds a duplicate
}

// key returns m's unescaped name.
func (s *state) key(m *member) []byte {
	if m.esc {
		return s.keys[m.kOff:m.kEnd]
	}
	return s.data[m.kOff:m.kEnd]
}

// utf16Rank maps each byte to its rank in an order under which comparing
// UTF-8 text byte by byte orders it as UTF-16 code units: bytes keep their
// order, except that the lead bytes of supplementary-plane characters
// (0xF0 and up; a surrogate pair in UTF-16, 0xD800..0xDBFF first) rank
// below the lead bytes 0xEE and 0xEF of U+E000..U+FFFF.
var utf16Rank = func() (r [256]byte) {
	for c := range 256 {
		switch {
		case c < 0xEE:
			r[c] = byte(c)
		case c >= 0xF0:
			r[c] = byte(c - 2)
		default: // 0xEE, 0xEF
			r[c] = byte(c + 0x10)
		}
	}
	return r
}()

// CompareUTF16 compares two UTF-8 strings as sequences of UTF-16 code
// units, the member order of RFC 8785 §3.2.3 (and of JavaScript's default
// sort). It differs from byte order only where a supplementary-plane
// character (U+10000 and above, a surrogate pair in UTF-16) meets one of
// U+E000..U+FFFF: the pair sorts first. It returns -1, 0 or +1. For invalid
// UTF-8 the order is still total and deterministic, but unspecified.
//
// At the first byte where two valid UTF-8 strings differ, either both
// bytes continue characters with the same lead byte (the characters have
// the same length and byte order is code point order is code unit order),
// or both are lead bytes, which order their characters' first code units
// as utf16Rank orders them. So one table lookup per string decides.
func CompareUTF16[T ~string | ~[]byte](a, b T) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			if utf16Rank[a[i]] < utf16Rank[b[i]] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}
