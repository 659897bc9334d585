package emulator

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAnEngineThatNeverAnswersIsStartedOnce: an engine whose process runs
// but never answers (a JVM stalled, a wrapper that hangs) is not started
// again on another port after its wait for readiness ran out: a new port
// does not help a process that is alive, and each retry added the whole
// wait again, in silence (RED_TEAM 494: 3 × 90 s before `idemkit dev`
// said anything). The error says how long it waited. A process that exits
// before it answers (its port lost to another process) is still retried.
func TestAnEngineThatNeverAnswersIsStartedOnce(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	script := filepath.Join(dir, "moto_server")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho start >> '"+starts+"'\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvMotoServer, script)
	defer func(d time.Duration) { readyTimeout = d }(readyTimeout)
	readyTimeout = 300 * time.Millisecond // the engine never answers: only the wait's length changes

	_, err := Start(context.Background(), Moto, Options{})
	if err == nil {
		t.Fatal("an engine that never answers started")
	}
	if !strings.Contains(err.Error(), "did not answer within 300ms") {
		t.Errorf("error %q does not say how long it waited", err)
	}
	b, _ := os.ReadFile(starts)
	if n := strings.Count(string(b), "start"); n != 1 {
		t.Fatalf("the engine was started %d times, want 1", n)
	}

	// An engine that exits before it answers is retried (3 attempts).
	if err := os.WriteFile(starts, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho start >> '"+starts+"'\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), Moto, Options{}); err == nil {
		t.Fatal("an engine that exits started")
	}
	b, _ = os.ReadFile(starts)
	if n := strings.Count(string(b), "start"); n != 3 {
		t.Fatalf("an engine that exits was started %d times, want 3", n)
	}
}

// TestStartDevWithNeitherJavaNorMoto: on a machine with neither java nor
// moto_server, `idemkit dev` (whose default engine is then moto) says
// that java is missing too, so the user learns that either install
// gives it an engine, not only moto's (RED_TEAM 495: it named
// moto_server alone, and the README asks for Java first).
func TestStartDevWithNeitherJavaNorMoto(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvMotoServer, "")
	_, err := StartDev(context.Background(), DefaultDevKind(), Options{})
	if err == nil || !strings.Contains(err.Error(), "moto_server is not on PATH") || !strings.Contains(err.Error(), "java is not on PATH either") {
		t.Fatalf("got %v", err)
	}
}
