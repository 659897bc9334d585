package crashpoint_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/internal/crashpoint"
)

// TestGroupCrashReturnsOnceDeadAndReleasesAtTheEnd: Crash returns once the
// process has died at its point; the dead process's call stays blocked
// until its test ends, then fails with ErrCrashed, and the test's end
// waits for it.
func TestGroupCrashReturnsOnceDeadAndReleasesAtTheEnd(t *testing.T) {
	var got error
	var proc *crashpoint.Process
	t.Run("process", func(t *testing.T) {
		g := crashpoint.NewGroup(t)
		g.Crash("after-claim", func(p *crashpoint.Process) func() {
			proc = p
			if p.Dead() {
				t.Fatal("a new process is dead")
			}
			return func() { got = p.Die() }
		})
		if !proc.Dead() || proc.Point != "after-claim" {
			t.Fatalf("Crash returned with the process dead=%v at %q", proc.Dead(), proc.Point)
		}
	})
	// The subtest's end released the call and waited for its goroutine.
	if !errors.Is(got, crashpoint.ErrCrashed) {
		t.Fatalf("the dead process's call: %v, want ErrCrashed", got)
	}
}
