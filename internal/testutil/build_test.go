package testutil

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// Build links a (pkg, flags, env) once per process: a second call gets a
// copy of the same binary in its own directory; RemoveBuilds deletes the
// kept one, and a later call builds again.
func TestBuildOncePerProcess(t *testing.T) {
	t.Cleanup(RemoveBuilds)
	a, err := Build(t.TempDir(), "ts", "internal/testsummary", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Build(t.TempDir(), "ts", "internal/testsummary", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ba, errA := os.ReadFile(a)
	bb, errB := os.ReadFile(b)
	if errA != nil || errB != nil || a == b || !bytes.Equal(ba, bb) || len(ba) == 0 {
		t.Fatalf("two builds: %s and %s (%v, %v), equal %t", a, b, errA, errB, bytes.Equal(ba, bb))
	}
	if fi, err := os.Stat(b); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("the copy is not executable: %v %v", fi, err)
	}
	buildsMu.Lock()
	n, dir := len(builds), buildsDir
	buildsMu.Unlock()
	if n != 1 {
		t.Fatalf("%d builds kept for one package, flags and environment", n)
	}
	if _, err := Build(t.TempDir(), "ts", "internal/testsummary", []string{"-ldflags=-s -w"}, nil); err != nil {
		t.Fatal(err)
	}
	if buildsMu.Lock(); len(builds) != 2 {
		t.Errorf("other flags share a build: %d kept", len(builds))
	}
	buildsMu.Unlock()
	RemoveBuilds()
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("RemoveBuilds left %s: %v", dir, err)
	}
}
