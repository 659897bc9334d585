// Package crashpoint simulates a process that dies at a named point, for
// the crash-point matrices of the store conformance suites
// (idemtest.RunCrashMatrix, ledgertest.RunCrashMatrix). A dead process's
// goroutine stops where it died and none of its later calls reach the
// store: each blocks until the test ends, then fails with ErrCrashed.
// Death is injected by name, never by timing.
package crashpoint

import (
	"errors"
	"sync"
)

// Phases of a crash matrix: which attempt of a request or effect dies.
const (
	// PhaseFirst: the first attempt dies.
	PhaseFirst = "first-attempt"
	// PhaseRetry: the first attempt fails retryably (or is not sent) and
	// the retry dies.
	PhaseRetry = "retry"
	// PhaseTakeover: the first attempt dies holding its claim, its lease
	// runs out, and the process that takes the claim over dies.
	PhaseTakeover = "takeover"
)

// Phases lists the phases.
var Phases = []string{PhaseFirst, PhaseRetry, PhaseTakeover}

// ErrCrashed is what a dead process's calls return once the test ends.
var ErrCrashed = errors.New("crashpoint: the process crashed")

// Process is one simulated process that dies at Point.
type Process struct {
	// Point is the crash point this process dies at.
	Point string
	dead  chan struct{}
	once  sync.Once
	end   <-chan struct{}
}

// New returns a live process that dies at point; end is closed when the
// test ends (and releases the dead process's blocked calls).
func New(point string, end <-chan struct{}) *Process {
	return &Process{Point: point, dead: make(chan struct{}), end: end}
}

// Die kills the process: the calling goroutine blocks until the test
// ends, then gets ErrCrashed.
func (p *Process) Die() error {
	p.once.Do(func() { close(p.dead) })
	<-p.end
	return ErrCrashed
}

// Dead reports whether the process has died.
func (p *Process) Dead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// Died is closed when the process dies.
func (p *Process) Died() <-chan struct{} { return p.dead }
