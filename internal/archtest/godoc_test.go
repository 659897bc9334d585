package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// goDocShortBudget is the most lines `go doc -short` may print for each
// library package: what a user scans to find the entry points. A package
// that would grow past it groups related names, unexports what users never
// need, or moves a concept to a subpackage of its own (as idem/event,
// idem/idemenv, idem/keyspace, idem/canon and ledger/identity are).
var goDocShortBudget = map[string]int{
	"./idem":   58,
	"./ledger": 46,
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
