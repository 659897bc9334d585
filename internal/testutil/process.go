package testutil

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// Process is a process group started by Start, with its whole output.
type Process struct {
	*proc.Process
	// Log is everything the process wrote to stdout and stderr.
	Log   *proc.Buffer
	grace time.Duration
}

// Stop stops the process group now, as the test's cleanup would (the
// cleanup then has nothing left to do).
func (p *Process) Stop() { p.Process.Stop(p.grace) }

// Start starts cmd (its Stdout and Stderr are set to the returned Log) as
// a process group with proc.Start, and stops it when the test ends (SIGTERM,
// SIGKILL after stopGrace), logging its output if the test failed. A start
// error fails the test.
func Start(t testing.TB, cmd *exec.Cmd, stopGrace time.Duration) *Process {
	t.Helper()
	log := &proc.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatalf("start %s: %v", filepath.Base(cmd.Path), err)
	}
	t.Cleanup(func() {
		p.Stop(stopGrace)
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(cmd.Path), log.String())
		}
	})
	return &Process{Process: p, Log: log, grace: stopGrace}
}
