package dynamotest

import (
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// process is a started emulator process.
type process struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	out      *tail
	stopOnce sync.Once
}

// startProcess starts name args in its own process group. The start happens
// on a goroutine that locks its OS thread and blocks in Wait for the life of
// the process: with Pdeathsig (Linux) the kernel kills the emulator when that
// thread, i.e. the test binary, dies.
func startProcess(name string, args []string) (*process, error) {
	p := &process{done: make(chan struct{}), out: &tail{max: 8 << 10}}
	p.cmd = exec.Command(name, args...)
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.WaitDelay = 2 * time.Second
	setProcAttrs(p.cmd)
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread ends with this goroutine, after the
		// process has exited.
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		_ = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *process) stop() {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		killGroup(p.cmd.Process, p.done, 2*time.Second)
	})
}

// tail keeps the last max bytes written to it (emulator output, for error
// messages).
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
