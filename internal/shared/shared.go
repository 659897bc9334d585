// Package shared locates the read-only reference data that lives beside the
// clone in ../shared (OpenWOP vectors, schemas, the error registry and the
// RFC 8785 test data). The data is never copied into the project.
package shared

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// ModuleRoot returns the repository root (the directory holding go.mod).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Locate returns the shared data directory: $IDEMKIT_SHARED if set, else
// ../shared beside the clone. ok is false when it does not exist.
func Locate() (dir string, ok bool) {
	dir = os.Getenv("IDEMKIT_SHARED")
	if dir == "" {
		dir = filepath.Join(ModuleRoot(), "..", "shared")
	}
	st, err := os.Stat(dir)
	return dir, err == nil && st.IsDir()
}

// Dir returns the shared data directory, or ends the test: under CI=true it
// fails (the data must be there), elsewhere it skips with a message saying
// where the data is expected.
func Dir(t testing.TB) string {
	t.Helper()
	dir, ok := Locate()
	if !ok {
		msg := "reference data not found at " + dir + " (the ../shared folder beside the clone; set IDEMKIT_SHARED to override)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// Path joins elem onto Dir(t).
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Dir(t)}, elem...)...)
}
