package main

import (
	"context"
	"path/filepath"
	"strings"
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
