package jcs

import (
	"crypto/sha256"
)

// flushSize is how much canonical text digest mode lets accumulate, outside
// every object, before it hands it to the hash: large enough that the hash
// sees long writes, small enough to stay in cache.
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

func sum256(data []byte, exact bool) ([sha256.Size]byte, error) {
	s := statePool.Get().(*state)
	if s.h == nil {
		s.h = sha256.New()
	} else {
		s.h.Reset()
	}
	s.hashing = true
	s.data = data
	s.exact = exact
	s.dst = s.buf[:0]
	err := s.run()
	var sum [sha256.Size]byte
	if err == nil {
		s.h.Sum(s.sum[:0])
		sum = s.sum
	}
	s.buf = s.dst[:0]
	s.reset()
	statePool.Put(s)
	return sum, err
}

// flush hands dst to the hash in digest mode (the caller then empties
// it). Only valid with no object open: nothing in dst can still move.
func (s *state) flush(dst []byte) {
	if s.hashing && len(dst) > 0 {
		s.h.Write(dst)
	}
}

var comma = []byte{','}
