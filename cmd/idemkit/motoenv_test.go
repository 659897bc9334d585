package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestMotoServerVariableNamingNothingIsSaidPlainly: IDEMKIT_MOTO_SERVER
// naming no executable (a stale path after a Python upgrade) makes `dev
// --emulator moto` say which variable names what, and what to do, not
// "fork/exec /path: no such file or directory". Failed before the fix: that
// text alone.
func TestMotoServerVariableNamingNothingIsSaidPlainly(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "moto_server")
	t.Setenv("IDEMKIT_MOTO_SERVER", missing)
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"dev", "--emulator", "moto", "--addr", "127.0.0.1:0"}, &out, &errb)
	msg := errb.String()
	want := "IDEMKIT_MOTO_SERVER names " + missing + ", which could not be started"
	if code != 1 || !strings.Contains(msg, want) || !strings.Contains(msg, "unset it") || strings.Contains(msg, "fork/exec") {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, msg, want)
	}
}
