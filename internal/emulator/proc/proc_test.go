//go:build unix

package proc_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

func TestBufferKeepsTheTail(t *testing.T) {
	b := &proc.Buffer{Max: 4}
	for _, s := range []string{"ab", "cde", "fghij"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "ghij" {
		t.Fatalf("Max 4: %q, want the last 4 bytes", got)
	}
	var all proc.Buffer
	_, _ = all.Write([]byte("ab"))
	_, _ = all.Write([]byte("cd"))
	if got := all.String(); got != "abcd" {
		t.Fatalf("Max 0: %q", got)
	}
}

func TestPoll(t *testing.T) {
	calls := 0
	err := proc.Poll(context.Background(), time.Millisecond, nil, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}

	exited := make(chan struct{})
	close(exited)
	if err := proc.Poll(context.Background(), time.Hour, exited, func(context.Context) error { return errors.New("down") }); !errors.Is(err, proc.ErrExited) {
		t.Fatalf("exited: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = proc.Poll(ctx, time.Hour, nil, func(context.Context) error { return errors.New("refused") })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestFreePort: a free port, bindable, and on Linux below the kernel's
// ephemeral range, which listeners on port 0 and outgoing connections
// draw from: none of the 200 ports those take here is ever one FreePort
// returns.
func TestFreePort(t *testing.T) {
	port, err := proc.FreePort()
	if err != nil || port <= 0 {
		t.Fatalf("%d %v", port, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("port %d is not free: %v", port, err)
	}
	l.Close()
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return // not Linux: the kernel chooses
	}
	start, _ := strconv.Atoi(strings.Fields(string(b))[0])
	if start < 11000 {
		return // no room below the range: the kernel chooses
	}
	if port >= start {
		t.Fatalf("port %d is inside the ephemeral range (from %d)", port, start)
	}
	for range 200 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if p := l.Addr().(*net.TCPAddr).Port; p < start {
			t.Fatalf("a listener on port 0 got %d, below the ephemeral range", p)
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return runtime.GOOS != "linux"
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// waitGone waits (bounded: a hang guard, not a speed limit) until pid no
// longer runs.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still running", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startShell starts `sh -c script` and returns it with the first line it
// prints (read from a pipe, not the Buffer, so no polling is needed).
func startShell(t *testing.T, script string) (*proc.Process, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatalf("start sh: %v", err)
	}
	t.Cleanup(func() { p.Stop(time.Second) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's output: %v", err)
	}
	return p, strings.TrimSpace(line)
}

// TestStopEndsTheGroup: Stop ends the leader and what it spawned.
func TestStopEndsTheGroup(t *testing.T) {
	p, line := startShell(t, `sleep 60 & echo $!; wait`)
	child, err := strconv.Atoi(line)
	if err != nil {
		t.Fatalf("child pid %q", line)
	}
	if p.Exited() {
		t.Fatal("exited early")
	}
	p.Stop(5 * time.Second)
	if !p.Exited() {
		t.Fatal("Stop returned before the leader exited")
	}
	waitGone(t, child, "the leader's child")
	p.Stop(5 * time.Second) // second call: no-op
}

// TestStopEscalatesToSIGKILL: a group that ignores SIGTERM is killed after
// the grace period.
func TestStopEscalatesToSIGKILL(t *testing.T) {
	p, _ := startShell(t, `trap "" TERM; echo ready; sleep 60; sleep 60`)
	p.Stop(100 * time.Millisecond)
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the leader exited")
	}
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); ok && (!ws.Signaled() || ws.Signal() != syscall.SIGKILL) {
		t.Fatalf("ended by %v, want SIGKILL", p.Cmd.ProcessState)
	}
}

const pdeathChild = "IDEMKIT_PROC_PDEATHSIG_CHILD"

// TestPdeathsigKillsChildOfKilledParent: when the parent is SIGKILLed (no
// cleanup runs), the kernel kills the process it started (Linux).
func TestPdeathsigKillsChildOfKilledParent(t *testing.T) {
	if os.Getenv(pdeathChild) == "1" {
		p, err := proc.Start(exec.Command("sleep", "60"))
		if err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("pid " + strconv.Itoa(p.PID()) + "\n")
		<-p.Done() // until killed
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux-only")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe, "-test.run", "^TestPdeathsigKillsChildOfKilledParent$", "-test.count=1")
	parent.Env = append(os.Environ(), pdeathChild+"=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer parent.Wait()
	defer parent.Process.Kill()
	sc := bufio.NewScanner(out)
	child := 0
	for child == 0 && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "pid "); ok {
			child, _ = strconv.Atoi(v)
		}
	}
	if child == 0 {
		t.Fatalf("the parent did not report its child: %v", sc.Err())
	}
	if !alive(child) {
		t.Fatal("child not running")
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, child, "the child of the SIGKILLed parent")
}
