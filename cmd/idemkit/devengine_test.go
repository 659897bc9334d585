package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevDetectsMotoEndpoint: `idemkit dev --dynamodb-endpoint` at a moto
// server reached directly (not through the serializing proxy) detects moto
// and sends its own requests one at a time, and says so; at DynamoDB Local
// it does not.
func TestDevDetectsMotoEndpoint(t *testing.T) {
	for _, kind := range []string{emulator.Moto, emulator.DynamoDBLocal} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			s, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools")})
			if err != nil {
				testutil.Unavailable(t, "%s emulator unavailable: %v", kind, err)
			}
			defer s.Stop()
			var logs strings.Builder
			out, w := newPipeOut()
			dctx, dcancel := context.WithCancel(ctx)
			code := make(chan int, 1)
			addr := testutil.FreeAddr(t)
			go func() {
				code <- run(dctx, []string{"dev", "--addr", addr, "--dynamodb-endpoint", s.Backend, "--api-key", "idk_engine_test_0123456789=acme"}, w, &syncWriter{w: &logs})
				w.Close()
			}()
			for !strings.Contains(out.text(), "idemkit dev: serving http://"+addr) {
				select {
				case c := <-code:
					t.Fatalf("idemkit dev exited %d:\n%s", c, out.text())
				case <-ctx.Done():
					t.Fatalf("not serving:\n%s", out.text())
				case <-time.After(50 * time.Millisecond):
				}
			}
			if c, m := devCall(t, "POST", "http://"+addr+"/runs", "idk_engine_test_0123456789", `{"workflowId":"conformance-noop"}`); c != 201 {
				t.Fatalf("POST /runs: %d %v", c, m)
			}
			dcancel()
			if c := <-code; c != 0 {
				t.Fatalf("exit %d", c)
			}
			serialized := strings.Contains(logs.String(), "reaching it one request at a time")
			if serialized != (kind == emulator.Moto) || strings.Contains(out.text(), "(moto at") != (kind == emulator.Moto) {
				t.Fatalf("%s: serialized=%v\nstdout:\n%s\nlog:\n%s", kind, serialized, out.text(), logs.String())
			}
		})
	}
}

// syncWriter serializes writes to w (the dev server logs from several
// goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// TestDevEngineHelpAndErrorsComeFromTheEngineTable: `idemkit dev -h` names
// every engine of the engine table (usage line and --emulator help), and an
// --emulator that is not in it is a usage error listing them, before
// anything starts.
func TestDevEngineHelpAndErrorsComeFromTheEngineTable(t *testing.T) {
	var out, errOut strings.Builder
	if c := run(context.Background(), []string{"dev", "-h"}, &out, &errOut); c != 0 {
		t.Fatalf("dev -h: exit %d: %s", c, errOut.String())
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"--emulator " + emulator.KindList("|", "|"), strings.Join(strings.Fields(emulator.FlagHelp()), " ")} {
		if !strings.Contains(help, want) {
			t.Errorf("dev -h lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	errOut.Reset()
	if c := run(context.Background(), []string{"dev", "--emulator", "dynamo-local", "--addr", testutil.FreeAddr(t)}, &out, &errOut); c != 2 ||
		!strings.Contains(errOut.String(), "unknown emulator kind") || !strings.Contains(errOut.String(), emulator.KindList(", ", " or ")) {
		t.Fatalf("exit %d, stderr %q", c, errOut.String())
	}
}
