package crashpoint

import (
	"sync"
	"testing"
	"time"
)

// Group is one test's simulated processes. When the test ends, the dead
// processes' blocked calls are released (they fail with ErrCrashed) and
// their goroutines are waited for.
type Group struct {
	t    testing.TB
	end  chan struct{}
	dead sync.WaitGroup
}

// NewGroup returns the processes of the test t.
func NewGroup(t testing.TB) *Group {
	g := &Group{t: t, end: make(chan struct{})}
	t.Cleanup(func() { close(g.end); g.dead.Wait() })
	return g
}

// Crash runs a process that dies at point and returns once it has died.
// start runs first, in the test's goroutine: it builds what the process
// runs over p (the process's dying view of the store embeds it) and
// returns the call the process makes, which Crash runs in a goroutine of
// its own. Crash fails the test if the process never reaches point.
func (g *Group) Crash(point string, start func(p *Process) (call func())) {
	g.t.Helper()
	p := New(point, g.end)
	call := start(p)
	g.dead.Add(1)
	go func() {
		defer g.dead.Done()
		call()
	}()
	select {
	case <-p.Died():
	case <-time.After(time.Minute): // a safety net against a hung test, not a verdict on speed
		g.t.Fatalf("the simulated process never reached its crash point %s", point)
	}
}
