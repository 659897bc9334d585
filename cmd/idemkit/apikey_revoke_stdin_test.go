package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestAPIKeyRevokeStdinStopsOnInterrupt: `apikey revoke --key -` waiting
// for a key on a stdin that sends none (a terminal nobody types in, a pipe
// left open) stops at Ctrl-C or SIGTERM, the end of the command's
// context: exit 1, nothing on stdout, stderr saying it was interrupted
// and nothing was revoked. Before, the read ignored the signal, which the
// command had taken over, and only the end of stdin or SIGKILL ended it.
func TestAPIKeyRevokeStdinStopsOnInterrupt(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	old := stdin
	stdin = pr
	defer func() { stdin = old }()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"apikey", "revoke", "--key", "-", "--endpoint", "http://127.0.0.1:1"}, &out, &errb)
	}()
	time.Sleep(100 * time.Millisecond)
	cancel() // Ctrl-C
	select {
	case c := <-code:
		if c != 1 || out.Len() != 0 || !strings.Contains(errb.String(), "interrupted") || !strings.Contains(errb.String(), "nothing revoked") {
			t.Fatalf("exit %d stdout %q stderr %q; want exit 1, stderr saying it was interrupted and nothing revoked", c, out.String(), errb.String())
		}
	case <-time.After(time.Minute): // a hang guard: a read deaf to Ctrl-C waits for ever
		pw.Close() // let the command end, then fail
		<-code
		t.Fatal("apikey revoke --key - still waiting for stdin a minute after Ctrl-C")
	}
}
