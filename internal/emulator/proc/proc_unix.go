//go:build unix

package proc

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// setProcAttrs puts the command in its own process group and, on Linux,
// asks the kernel to kill it when the thread that started it dies (see
// pdeathsig_linux.go).
func setProcAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setPdeathsig(cmd.SysProcAttr)
}

// killGroup sends SIGTERM to process group pgid, waits up to grace for done
// to close, then sends SIGKILL.
func killGroup(pgid int, done <-chan struct{}, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
		// The leader is gone; make sure no straggler in its group survives.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

// LockFile takes an exclusive advisory lock (flock) on path, creating the
// file if missing, and blocks until it has it; the returned function
// releases it. Used so that parallel processes install a tool once.
func LockFile(path string) (func(), error) {
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
