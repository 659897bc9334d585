//go:build !unix

package proc

import (
	"os"
	"os/exec"
	"time"
)

func setProcAttrs(*exec.Cmd) {}

// killGroup kills the leader only: there are no process groups here.
func killGroup(pid int, done <-chan struct{}, grace time.Duration) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
	<-done
}

// LockFile is a no-op where flock is unavailable.
func LockFile(string) (func(), error) { return func() {}, nil }
