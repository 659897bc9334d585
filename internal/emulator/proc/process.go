package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// Process is a command started by Start. Its methods are safe for
// concurrent use.
type Process struct {
	// Cmd is the started command; Cmd.ProcessState is set once Done is
	// closed.
	Cmd      *exec.Cmd
	done     chan struct{}
	stopOnce sync.Once
}

// Start starts cmd in its own process group (replacing cmd.SysProcAttr) and
// reaps it when it exits; see the package doc for the guarantees. cmd must
// not have been started, and the caller must not call cmd.Wait.
func Start(cmd *exec.Cmd) (*Process, error) {
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	setProcAttrs(cmd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the
		// process has exited (see setPdeathsig).
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// PID is the process id; the process leads the process group of that id.
func (p *Process) PID() int { return p.Cmd.Process.Pid }

// Done is closed once the process has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL if the leader has not
// exited within grace, and SIGKILL to whatever is left in the group once it
// has. It returns when the leader has exited. Only the first call acts;
// later calls return at once.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		if p.Exited() {
			return
		}
		killGroup(p.PID(), p.done, grace)
	})
}
