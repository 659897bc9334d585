package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// TestDoctorSummaryNamesWhatItCompares: `idemkit -h` sums doctor up with
// the same list of what it compares as docs/CLI.md's table of commands
// (RED_TEAM 587: the help line left out the table's status, a global
// table's replicas and deletion protection, which doctor checks).
func TestDoctorSummaryNamesWhatItCompares(t *testing.T) {
	cli, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?m)^\\| `idemkit doctor` \\| compares deployed tables with `template.yaml` \\(([^)]*)\\)").FindSubmatch(cli)
	if m == nil {
		t.Fatal("docs/CLI.md's table has no doctor row of the form \"compares deployed tables with `template.yaml` (...)\"")
	}
	want := "(" + strings.ReplaceAll(string(m[1]), "`", "") + ")"
	for _, e := range commands.entries {
		if e.line == "doctor" {
			if !strings.Contains(e.summary, want) {
				t.Fatalf("idemkit -h sums doctor up as %q; docs/CLI.md lists what it compares as %s", e.summary, want)
			}
			return
		}
	}
	t.Fatal("no doctor command")
}
