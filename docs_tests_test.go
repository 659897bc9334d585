package idemkit_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docTestName is a Go test a document cites: TestName, or the start of
// several in a -run pattern (TestStalledStore stands for every test whose
// name begins so).
var docTestName = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// citedTestsGone are tests a document names on purpose as removed.
var citedTestsGone = map[string]string{
	"TestToV2HandlersHeaders": "docs/PERFORMANCE.md says the pass's test went with the pass",
}

// TestDocsCiteExistingTests: every test a Markdown file of the repository
// names as the proof of a claim ("TestX pins it", a `go test -run 'TestX'`
// line) is a test of the module: a renamed or removed test leaves no
// document pointing a reader at nothing.
func TestDocsCiteExistingTests(t *testing.T) {
	src := testSources(t)
	for _, doc := range markdownFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, name := range docTestName.FindAllString(string(b), -1) {
			if seen[name] || citedTestsGone[name] != "" {
				continue
			}
			seen[name] = true
			if !strings.Contains(src, "func "+name) {
				t.Errorf("%s cites %s, which is no test of the module (renamed or removed?)", doc, name)
			}
		}
	}
}
