package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// Generated holds the file at rel (a slash-separated path under the module
// root), generated from template.yaml, to want; with update it first
// writes want there. A file that is missing or differs fails the test,
// which names regen, the command that rewrites it.
func Generated(t testing.TB, rel, want string, update bool, regen string) {
	t.Helper()
	path := filepath.Join(shared.ModuleRoot(), filepath.FromSlash(rel))
	if update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to generate it)", err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date with template.yaml; run %s\n--- want\n%s", rel, regen, want)
	}
}
