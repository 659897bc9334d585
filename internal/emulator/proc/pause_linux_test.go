package proc_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

const busyChild = "IDEMKIT_PROC_BUSY_CHILD"

// TestPauseGroupReturnsOnceEveryThreadIsStopped: a process with many
// threads that keep waking up is stopped with PauseGroup; when it returns,
// no thread of it is runnable (every /proc task state is T), in every one
// of 50 rounds. A bare kill(SIGSTOP) does not give that: read at once
// after it, the same check found threads still running in 80 of 200
// rounds on two cores, which is how a paused engine could still answer a
// request sent right after the signal.
func TestPauseGroupReturnsOnceEveryThreadIsStopped(t *testing.T) {
	if os.Getenv(busyChild) == "1" {
		for range 16 {
			go func() {
				runtime.LockOSThread()
				for {
					time.Sleep(100 * time.Microsecond)
				}
			}()
		}
		os.Stdout.WriteString("ready\n")
		select {}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^TestPauseGroupReturnsOnceEveryThreadIsStopped$", "-test.count=1")
	cmd.Env = append(os.Environ(), busyChild+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := proc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.ResumeGroup(p.PID()); p.Stop(time.Second) })
	if sc := bufio.NewScanner(out); !sc.Scan() || sc.Text() != "ready" {
		t.Fatalf("the child did not start: %v", sc.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	for round := range 50 {
		if err := proc.PauseGroup(ctx, p.PID()); err != nil {
			t.Fatal(err)
		}
		if running := runningTasks(t, p.PID()); len(running) > 0 {
			t.Fatalf("round %d: PauseGroup returned with threads not stopped: %v", round, running)
		}
		if err := proc.ResumeGroup(p.PID()); err != nil {
			t.Fatal(err)
		}
	}
}

// runningTasks lists pid's threads whose /proc state is not stopped.
func runningTasks(t *testing.T, pid int) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(files) < 2 {
		t.Fatalf("threads of %d: %v %v", pid, files, err)
	}
	var running []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		state := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
		if state != "T" && state != "t" {
			running = append(running, filepath.Base(filepath.Dir(f))+":"+state)
		}
	}
	return running
}
