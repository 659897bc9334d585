package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
)

// lockedLog is a log writer a test reads while the command writes it.
type lockedLog struct {
	mu  sync.Mutex
	log strings.Builder
}

func (l *lockedLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.log.Write(b)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.log.String()
}

// TestDevStopsWhenItsEngineDies: the DynamoDB engine `idemkit dev`
// started exits under it (the JVM killed, out of memory): its tables were
// in that process's memory, so no retry will ever succeed. Dev stops
// (exit 1) with a line saying the engine exited and to start dev again.
// Before (RED_TEAM 499) dev went on serving: every request answered `503
// idemkit.store_unavailable ... retry after 2 s`, the log filling with
// the stream pollers' failures, until the user stopped it.
func TestDevStopsWhenItsEngineDies(t *testing.T) {
	logs := &lockedLog{}
	out := &lockedLog{}
	code := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		code <- run(ctx, []string{"dev", "--emulator", "moto", "--addr", testutil.FreeAddr(t)}, out, logs)
	}()
	pidRE := regexp.MustCompile(`"msg":"dev: started the DynamoDB engine".*"pid":(\d+)`)
	var pid int
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if m := pidRE.FindStringSubmatch(logs.String()); m != nil && strings.Contains(out.String(), "serving") {
			pid, _ = strconv.Atoi(m[1])
			break
		}
		select {
		case c := <-code:
			t.Fatalf("dev ended (exit %d) before it served:\n%s", c, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			testutil.Unavailable(t, "idemkit dev --emulator moto did not serve:\n%s", logs.String())
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 1 || !strings.Contains(logs.String(), "idemkit dev: the DynamoDB engine (moto, pid "+strconv.Itoa(pid)+") exited") || !strings.Contains(logs.String(), "start idemkit dev again") {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and a line saying the engine exited", c, logs.String())
		}
	case <-time.After(3 * time.Minute): // only a dev that never notices gets here
		t.Fatalf("dev went on after its engine died:\n%s", logs.String())
	}
}
