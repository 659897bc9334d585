package jcs

import (
	"hash"
	"sync"
	"sync/atomic"
)

// pipeMin is the smallest input whose digest hashes beside the parse, on
// a second goroutine, when the process may run two at once
// (GOMAXPROCS >= 2): the canonical text is handed to the hasher in pieces
// of about pipeChunk bytes as it becomes final, so that the digest takes
// about as long as the parse alone instead of the parse plus the hash.
const (
	pipeMin   = 128 << 10
	pipeChunk = 32 << 10
)

// pipe is a digest's hasher goroutine while one runs (on). The parse
// queues pieces of canonical text that can no longer change (slices of
// the input or of the text it keeps); the hasher writes them to the
// state's hash in order. The parse hashes queued pieces itself when the
// hasher has fallen behind (it is not running), and the rest at the end,
// so that a hasher kept off the second processor costs little more than
// hashing in line.
type pipe struct {
	want    bool // this digest may start a hasher
	on      bool
	spec    bool // text inside the top-level object was queued
	checked int  // members of the top-level object found in order: ms[:checked+1]
	l       *link
}

// link is what the parse and its hasher share. It is not part of the
// pooled state: the hasher may still be ending after the parse is done
// with the state, or the parse still draining the queue after the hasher
// ended; the last of the two gives the link back (to links).
type link struct {
	h        hash.Hash
	mu       sync.Mutex
	q        []piece // q[head:] are still to be hashed
	head     int
	busy     bool // the hasher is writing q[head]
	stop     bool // the hasher takes no more pieces
	sleeping bool // the hasher waits on wake
	waiting  bool // the parse waits on ack
	wake     chan struct{}
	ack      chan struct{}
	refs     atomic.Int32 // the parse and the hasher: the last to let go returns it
}

// links keeps a few links for reuse: a digest that starts a hasher then
// allocates nothing in the steady state.
var links struct {
	mu   sync.Mutex
	free []*link
}

const maxFreeLinks = 16

func getLink() *link {
	links.mu.Lock()
	var l *link
	if n := len(links.free); n > 0 {
		l = links.free[n-1]
		links.free[n-1] = nil
		links.free = links.free[:n-1]
	}
	links.mu.Unlock()
	if l == nil {
		l = &link{wake: make(chan struct{}, 1), ack: make(chan struct{}, 1)}
	}
	return l
}

func putLink(l *link) {
	l.h = nil
	if cap(l.q) > 1024 {
		l.q = nil
	}
	links.mu.Lock()
	if len(links.free) < maxFreeLinks {
		links.free = append(links.free, l)
	}
	links.mu.Unlock()
}

type piece struct{ a, b []byte }

// hashers hands a starting hasher goroutine its state: the goroutine is
// started without arguments, which does not allocate.
var hashers = make(chan *link, 64)

// pipesStarted counts hashers started (tests read it).
var pipesStarted atomic.Int64

// Tests set these to order the hasher and the parse: pieceHook runs in
// the hasher before it writes a piece, pushHook in push before it queues
// one, stopHook in stopPipe before it waits for the hasher. They are nil
// otherwise.
var pieceHook, pushHook, stopHook func()

func (s *state) startPipe() {
	l := getLink()
	l.h = s.h
	l.q, l.head, l.busy, l.stop, l.sleeping, l.waiting = l.q[:0], 0, false, false, false, false
	l.refs.Store(2)
	s.p.l, s.p.on = l, true
	pipesStarted.Add(1)
	go hashWorker()
	hashers <- l
}

// push queues a piece for the hasher, or hashes it, with the pieces
// queued before it, when the hasher is not keeping up.
func (s *state) push(a, b []byte) {
	p := s.p.l
	if pushHook != nil {
		pushHook()
	}
	p.mu.Lock()
	if len(p.q)-p.head >= 2 && !p.busy {
		// The hasher is not running: hash its backlog here.
		s.drainLocked()
		p.mu.Unlock()
		s.h.Write(a)
		s.h.Write(b)
		return
	}
	// Never wait for the hasher here: a hasher that shares its processor
	// with other work would hold the parse back.
	p.q = append(p.q, piece{a, b})
	wake := p.sleeping
	p.sleeping = false
	p.mu.Unlock()
	if wake {
		p.wake <- struct{}{}
	}
}

// drainLocked hashes the queued pieces, with p.mu held and the hasher
// not writing.
func (s *state) drainLocked() {
	p := s.p.l
	for k := p.head; k < len(p.q); k++ {
		s.h.Write(p.q[k].a)
		s.h.Write(p.q[k].b)
	}
	clear(p.q)
	p.q, p.head = p.q[:0], 0
}

// stopPipe ends the hasher's part: once it has written the piece it is
// writing, the parse hashes what is still queued (nothing with abort:
// the parse failed, or starts again). The hasher goroutine then ends by
// itself, without touching the state again.
func (s *state) stopPipe(abort bool) {
	p := s.p.l
	if stopHook != nil {
		stopHook()
	}
	p.mu.Lock()
	p.stop = true
	for p.busy {
		p.waiting = true
		p.mu.Unlock()
		<-p.ack
		p.mu.Lock()
	}
	if abort {
		clear(p.q)
		p.q, p.head = p.q[:0], 0
	} else {
		s.drainLocked()
	}
	wake := p.sleeping
	p.sleeping = false
	p.mu.Unlock()
	if wake {
		p.wake <- struct{}{}
	}
	s.p.on, s.p.l = false, nil
	p.release()
}

// release lets go of l, for the parse or the hasher, whichever is last.
func (l *link) release() {
	if l.refs.Add(-1) == 0 {
		putLink(l)
	}
}

// unspec starts the top-level object's digest again, with no hasher: its
// members are not in order after all.
func (s *state) unspec() {
	if s.p.on {
		s.stopPipe(true)
	}
	s.h.Reset()
	s.same, s.hashed = true, 0
	s.fed, s.flushDepth, s.flushAt, s.p.spec = 0, 1, flushSize, false
}

func hashWorker() {
	p := <-hashers
	h := p.h
	p.mu.Lock()
	for {
		if p.stop {
			break
		}
		if p.head == len(p.q) {
			clear(p.q)
			p.q, p.head = p.q[:0], 0
			p.sleeping = true
			p.mu.Unlock()
			<-p.wake
			p.mu.Lock()
			continue
		}
		q := p.q[p.head]
		p.busy = true
		p.mu.Unlock()
		if pieceHook != nil {
			pieceHook()
		}
		h.Write(q.a)
		h.Write(q.b)
		p.mu.Lock()
		p.busy = false
		p.q[p.head] = piece{}
		p.head++
		if p.waiting {
			p.waiting = false
			p.ack <- struct{}{}
		}
	}
	p.mu.Unlock()
	p.release()
}
