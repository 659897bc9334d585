package idemkit_test

import (
	"os"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/webhook"
)

// TestFunctionsReadmeNamesEveryBuiltInWorkflow: functions/README.md's
// "Built-in workflows" paragraph names every workflow the host runs
// (webhook.Workflows, what discovery lists as builtIn), so a workflow added
// to the host is described where a user looks for it.
func TestFunctionsReadmeNamesEveryBuiltInWorkflow(t *testing.T) {
	b, err := os.ReadFile("functions/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, para, ok := strings.Cut(string(b), "\nBuilt-in workflows: ")
	if !ok {
		t.Fatal(`functions/README.md has no paragraph starting "Built-in workflows: "`)
	}
	para, _, _ = strings.Cut(para, "\n\n")
	for _, w := range webhook.Workflows {
		if !strings.Contains(para, "`"+w+"`") {
			t.Errorf("functions/README.md's built-in workflows do not name `%s`", w)
		}
	}
}
