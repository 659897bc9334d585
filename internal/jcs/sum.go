package jcs

import (
	"crypto/sha256"
)

// flushSize is how much canonical text digest mode lets accumulate, outside
// every object, before it hands it to the hash: large enough that the hash
// sees long writes, small enough to stay in cache. Text inside the
// outermost object waits for its '}': hashing it before then, while the
// member names so far are in order (restarting the digest when a later
// one is not), was measured and gained nothing on 1 MB and 6 MB bodies
// (the canonical text of a body this size stays in the L2 cache).
const flushSize = 32 << 10

// Sum256 returns the SHA-256 of the canonical form of data, the Layer-1
// request-body fingerprint, without building the canonical form as a
// whole: text that no open object can still reorder goes to the hash as it
// completes (a top-level array is hashed element by element), and the
// members of the outermost object are hashed in sorted order where they
// were written instead of being moved. The scratch space is pooled, so it
// does not allocate in the steady state, whatever the size of data.
func Sum256(data []byte) ([sha256.Size]byte, error) {
	return sum256(data, false)
}

// Sum256Exact is Sum256 with the number check of CanonicalizeExact.
func Sum256Exact(data []byte) ([sha256.Size]byte, error) {
	return sum256(data, true)
}

// Sum256ExactCanonical is Sum256Exact that also reports whether data is
// its own canonical form, byte for byte (no whitespace, members in order,
// every string and number already in canonical form): sum is then the
// SHA-256 of data itself too, so a caller that needs both hashes takes
// one pass over the bytes. canonical is true only for such data, though
// not for all of it: text the digest writes again, if to the same bytes
// (a number of more than 15 significant digits or with an exponent, a
// control character's \u00XX escape), is not traced back to the input.
func Sum256ExactCanonical(data []byte) (sum [sha256.Size]byte, canonical bool, err error) {
	s, sum, err := begin(data, true)
	canonical = err == nil && s.same && s.hashed == len(data)
	s.finish()
	return sum, canonical, err
}

func sum256(data []byte, exact bool) ([sha256.Size]byte, error) {
	s, sum, err := begin(data, exact)
	s.finish()
	return sum, err
}

// begin hashes the canonical form of data with a pooled state, which
// the caller hands back with finish.
func begin(data []byte, exact bool) (*state, [sha256.Size]byte, error) {
	s := statePool.Get().(*state)
	if s.h == nil {
		s.h = sha256.New()
	} else {
		s.h.Reset()
	}
	s.hashing = true
	s.same, s.hashed = true, 0
	s.data = data
	s.exact = exact
	s.dst = s.buf[:0]
	err := s.run()
	var sum [sha256.Size]byte
	if err == nil {
		s.h.Sum(s.sum[:0])
		sum = s.sum
	}
	return s, sum, err
}

// finish returns a state from begin to the pool.
func (s *state) finish() {
	s.buf = s.dst[:0]
	s.reset()
	statePool.Put(s)
}

// flush hands dst to the hash in digest mode (the caller then empties
// it). Only valid with no object open: nothing in dst can still move.
func (s *state) flush(dst []byte) {
	if s.hashing && len(dst) > 0 {
		s.h.Write(dst)
		s.track(dst)
	}
}

// track keeps s.same, whether everything hashed so far is the input's
// first s.hashed bytes in place, after b was hashed: true while every
// piece hashed is the input's next bytes themselves (a pending run hashed
// straight from the input), false for good once one is not (text that
// was copied, rewritten or reordered).
func (s *state) track(b []byte) {
	if s.same && s.hashed < len(s.data) && len(b) <= len(s.data)-s.hashed && &b[0] == &s.data[s.hashed] {
		s.hashed += len(b)
		return
	}
	s.same = false
}

var comma = []byte{','}
