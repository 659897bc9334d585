//go:build !unix

package dynamotest

import (
	"os"
	"os/exec"
	"time"
)

func setProcAttrs(*exec.Cmd) {}

func killGroup(p *os.Process, done <-chan struct{}, grace time.Duration) {
	_ = p.Kill()
	<-done
}

// lockFile is a no-op where flock is unavailable.
func lockFile(string) (func(), error) { return func() {}, nil }
