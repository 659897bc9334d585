package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestReadmeInstallNamesEveryCommand: the README's Install step says what
// `go install ./cmd/idemkit` gives ("the idemkit CLI: dev, tables, ..."):
// it names every top-level command `idemkit -h` lists, no fewer (RED_TEAM
// 461: it left out webhook and version).
func TestReadmeInstallNamesEveryCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var named string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "go install ./cmd/idemkit)") {
			_, named, _ = strings.Cut(l, "the idemkit CLI:")
			break
		}
	}
	if named == "" {
		t.Fatal(`README.md: no "go install ./cmd/idemkit)" line saying "the idemkit CLI: ..."`)
	}
	have := map[string]bool{}
	for _, w := range strings.Split(named, ",") {
		have[strings.TrimSpace(w)] = true
	}
	seen := map[string]bool{}
	for _, e := range commands.entries {
		top := e.name()
		if seen[top] {
			continue
		}
		seen[top] = true
		if !have[top] {
			t.Errorf("README.md's Install line names the commands %q but not %q", strings.TrimSpace(named), top)
		}
	}
	for w := range have {
		if !seen[w] {
			t.Errorf("README.md's Install line names %q, which is no command of idemkit", w)
		}
	}
}
