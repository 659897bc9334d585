//go:build unix

package dynamotest

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// setProcAttrs puts the emulator in its own process group (so stopping it
// also stops anything it spawned) and, on Linux, asks the kernel to kill it
// when the thread that started it dies (see pdeathsig_linux.go).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
}

// killGroup sends SIGTERM to the process group of p, waits up to grace for
// done to close, then sends SIGKILL.
func killGroup(p *os.Process, done <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	select {
	case <-done:
		// The leader is gone; make sure no straggler in its group survives.
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	case <-time.After(grace):
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		<-done
	}
}

// lockFile takes an exclusive advisory lock on path (created if missing);
// the returned function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
