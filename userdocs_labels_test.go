package idemkit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// redTeamNumber is a finding's number given as a reason: "RED_TEAM 340".
var redTeamNumber = regexp.MustCompile(`RED_TEAM \d+`)

// TestUserDocsGiveReasonsNotFindingNumbers: the pages a user reads (the
// README, functions/README.md and docs/, but docs/RED_TEAM.md itself and
// the performance history, a log of the work) state a behaviour's reason
// in words and link a finding by its page and heading, never by its bare
// number, which means nothing to a reader and changes when findings are
// renumbered (RED_TEAM 395: docs/SECURITY.md gave three such numbers as its
// reasons).
func TestUserDocsGiveReasonsNotFindingNumbers(t *testing.T) {
	files := []string{"README.md", filepath.Join("functions", "README.md")}
	docs, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range docs {
		if b := filepath.Base(f); b != "RED_TEAM.md" && b != "performance-history.md" {
			files = append(files, f)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := redTeamNumber.FindString(line); m != "" {
				t.Errorf("%s:%d gives %q as a reason: say it in words, or link the finding in RED_TEAM.md", f, i+1, m)
			}
		}
	}
}
