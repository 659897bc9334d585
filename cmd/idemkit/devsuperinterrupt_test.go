package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevSupervisorInterruptedWhileStartingStopsQuietly: Ctrl-C while
// `idemkit dev --conformance-seams` (its own restart supervisor) starts
// its engine stops it as plain dev stops (RED_TEAM 72): exit 0 and one
// line saying it was interrupted. Before (RED_TEAM 498) the supervisor
// reported the cancelled start as a failure, exit 1: `dynamodb-local did
// not become ready: context canceled (last error: …); output:` and the
// engine's banner.
func TestDevSupervisorInterruptedWhileStartingStopsQuietly(t *testing.T) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		testutil.Unavailable(t, "moto_server is not on PATH: %v", err)
	}
	t.Setenv(envSupervised, "") // become the supervisor, as a user's dev does
	const want = "idemkit dev: interrupted while starting; stopped what it had started"
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"dev", "--emulator", "moto", "--conformance-seams", "--addr", testutil.FreeAddr(t)}, &out, &errs)
	var plain []string
	for _, l := range strings.Split(strings.TrimSpace(errs.String()), "\n") {
		if !strings.HasPrefix(l, "{") {
			plain = append(plain, l)
		}
	}
	if code != 0 || len(plain) != 1 || plain[0] != want || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 0, nothing on stdout and one line %q", code, out.String(), errs.String(), want)
	}
}
