package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
)

// pipeOut collects a command's stdout and lets a test wait for a line.
type pipeOut struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

func newPipeOut() (*pipeOut, io.WriteCloser) {
	pr, pw := io.Pipe()
	p := &pipeOut{more: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
	}()
	return p, pw
}

func (p *pipeOut) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// startDevInProcess runs `idemkit dev ARGS` against the shared emulator
// (--dynamodb-endpoint) until the test ends, and returns its stdout once it
// serves.
func startDevInProcess(t *testing.T, args ...string) (*pipeOut, string) {
	t.Helper()
	addr := testutil.FreeAddr(t)
	out, w := newPipeOut()
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, append([]string{"dev", "--addr", addr}, args...), w, io.Discard)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != 0 {
				t.Errorf("idemkit dev exited %d after cancel", c)
			}
		case <-time.After(2 * time.Minute): // a hang guard
			t.Error("idemkit dev did not stop within 2 minutes")
		}
	})
	waitServing(t, out, addr, code)
	return out, "http://" + addr
}

// waitServing returns once the `idemkit dev` writing to out serves addr;
// it fails the test if dev exits first (its status on code) or does not
// serve within 2 minutes.
func waitServing(t *testing.T, out *pipeOut, addr string, code <-chan int) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for !strings.Contains(out.text(), "idemkit dev: serving http://"+addr) {
		select {
		case c := <-code:
			t.Fatalf("idemkit dev exited %d:\n%s", c, out.text())
		case <-deadline:
			t.Fatalf("idemkit dev not serving:\n%s", out.text())
		case <-out.more:
		case <-time.After(100 * time.Millisecond):
		}
	}
}
