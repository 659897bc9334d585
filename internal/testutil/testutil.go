// Package testutil holds the helpers shared by tests that start real
// processes: the CI=true fail-instead-of-skip rule, free loopback
// addresses, building the module's binaries, starting a process group for
// the length of a test and waiting for an HTTP server to answer. It depends
// on the standard library and internal/emulator/proc only.
package testutil

import (
	"os"
	"testing"
)

// Unavailable ends a test whose prerequisite (an emulator, a tool, a
// binary) cannot be had here: under CI=true it fails (CI must run it),
// elsewhere it is skipped with the reason.
func Unavailable(t testing.TB, format string, a ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, a...)
	}
	t.Skipf(format, a...)
}
