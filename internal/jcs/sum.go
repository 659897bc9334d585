package jcs

import (
	"crypto/sha256"
	"runtime"
)

// flushSize is how much canonical text digest mode lets accumulate, outside
// every object, before it hands it to the hash: large enough that the hash
// sees long writes, small enough to stay in cache. Text inside the
// outermost object waits for its '}' when hashed in line: hashing it
// before then, while the member names so far are in order (restarting the
// digest when a later one is not), was measured and gained nothing on 1 MB
// and 6 MB bodies (the canonical text of a body this size stays in the L2
// cache). On a second goroutine it does (pipe.go).
const flushSize = 32 << 10

// Sum256 returns the SHA-256 of the canonical form of data, the Layer-1
// request-body fingerprint, without building the canonical form as a
// whole: text that no open object can still reorder goes to the hash as it
// completes (a top-level array is hashed element by element), and the
// members of the outermost object are hashed in sorted order where they
// were written instead of being moved. From 128 KB, when GOMAXPROCS is at
// least 2, canonical text taken in place from data is hashed on a second
// goroutine as the parse goes on, which ends before Sum256 returns. The
// scratch space is pooled, so it does not allocate in the steady state,
// whatever the size of data.
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
	s.flushDepth, s.flushAt, s.fed = 1, flushSize, 0
	if len(data) >= pipeMin && runtime.GOMAXPROCS(0) >= 2 {
		s.p.want = true
		if i := skipWS(data, 0); i < len(data) && data[i] == '{' {
			s.flushDepth, s.flushAt = 2, pipeChunk
		}
	}
	err := s.run()
	if s.p.on {
		s.stopPipe(err != nil)
	}
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

// flush writes b to the hash and tracks it.
func (s *state) flush(b []byte) {
	if len(b) > 0 {
		s.h.Write(b)
		s.track(b)
	}
}

// feed hashes the canonical text from offset s.fed to its end, dst
// followed by pending, or queues it for the hasher while one runs.
func (s *state) feed(dst, pending []byte) {
	a := dst[min(s.fed, len(dst)):]
	if s.fed > len(dst) {
		pending = pending[s.fed-len(dst):]
	}
	if !s.p.on {
		s.flush(a)
		s.flush(pending)
		return
	}
	if len(a) > 0 {
		s.track(a)
	}
	if len(pending) > 0 {
		s.track(pending)
	}
	s.push(a, pending)
}

// flushText is called at an array's comma, at offset o = len(dst)+i-run
// of the canonical text, once o reaches s.flushAt with fewer than
// s.flushDepth objects open. Outside every object nothing before the
// comma can move any more: the text goes to the hash. In the top-level
// object's value it is final if the object's members so far are in order
// (they are then in order in the canonical text too): it goes to the
// hash, and is kept in case a later member is out of order. Text queued
// for the hasher is kept until the end (dst is not emptied); text hashed
// in line outside every object is dropped. flushText returns dst and run.
func (s *state) flushText(dst, d []byte, run, i int, ms []member) ([]byte, int) {
	if s.objects == 1 {
		for k := s.p.checked + 1; k < len(ms); k++ {
			a, b := &ms[k-1], &ms[k]
			if a.pre > b.pre || a.pre == b.pre && CompareUTF16(s.key(a), s.key(b)) >= 0 {
				s.flushDepth = 1 // out of order (or a duplicate): hashed at the '}'
				return dst, run
			}
			s.p.checked = k
		}
		s.p.spec = true
	}
	if s.p.want || s.p.on {
		// Overlap pays only for text hashed where the parse found it in
		// the input: text the parse wrote (copied, rewritten or reordered)
		// has to travel to the other processor's cache, and back for the
		// next digest that writes there, which costs the parse more than
		// the hash it saves (measured; see docs/PERFORMANCE.md).
		written := len(dst) - min(s.fed, len(dst))
		if n := len(dst) + i - run - s.fed; written > n/4 {
			s.p.want = false
			if s.p.on {
				s.stopPipe(false)
			}
			if s.objects == 1 {
				s.flushDepth = 1 // the rest is hashed at the '}'
			}
		} else if !s.p.on {
			s.startPipe()
		}
	}
	s.feed(dst, d[run:i])
	if s.p.on || s.objects == 1 {
		s.fed = len(dst) + i - run
		s.flushAt = s.fed + pipeChunk
		return dst, run
	}
	s.fed, s.flushAt = 0, flushSize
	return dst[:0], i
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
