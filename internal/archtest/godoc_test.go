package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// goDocShortBudget is the most lines `go doc -short` may print for each
// library package: what a user scans to find the entry points. It only
// ever goes down; a package that grows past it groups related names,
// unexports what users never need, or moves a concept to a subpackage.
// The goal is 60 lines for idem and 45 for ledger; these are the counts
// reached so far, held so they cannot grow back.
var goDocShortBudget = map[string]int{
	"./idem":   74,
	"./ledger": 44,
}

// TestGoDocShortBudget runs `go doc -short` on each library package and
// holds its line count to the budget.
func TestGoDocShortBudget(t *testing.T) {
	for pkg, budget := range goDocShortBudget {
		cmd := exec.Command("go", "doc", "-short", pkg)
		cmd.Dir = shared.ModuleRoot()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go doc -short %s: %v", pkg, err)
		}
		if n := strings.Count(string(out), "\n"); n > budget {
			t.Errorf("go doc -short %s prints %d lines, budget %d:\n%s", pkg, n, budget, out)
		}
	}
}
