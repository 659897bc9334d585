package idemkit_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/emulator"
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

// TestContributingMapsEveryPackage: CONTRIBUTING.md's package map says
// where things are today, so every package of the module (a directory
// holding non-test Go files, outside the nested router modules, testdata
// and installed tools) is named there, in backquotes, as its path from the
// repository root.
func TestContributingMapsEveryPackage(t *testing.T) {
	b, err := os.ReadFile("CONTRIBUTING.md")
	if err != nil {
		t.Fatal(err)
	}
	// The map is the section "## Package map", up to the next section: a
	// package named only elsewhere (where a change goes, how tests run) is
	// not mapped.
	const heading = "\n## Package map\n"
	start := strings.Index(string(b), heading)
	if start < 0 {
		t.Fatal(`CONTRIBUTING.md has no "## Package map" section`)
	}
	doc := string(b)[start+len(heading):]
	if end := strings.Index(doc, "\n## "); end >= 0 {
		doc = doc[:end]
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata":
				return filepath.SkipDir
			}
			if path == "bin" || path == "tools" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir == "." || seen[dir] {
			return nil
		}
		seen[dir] = true
		if !strings.Contains(doc, "`"+dir+"`") {
			t.Errorf("CONTRIBUTING.md's package map does not name `%s` (%s)", dir, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// engineExceptionOn is a document's "on dynalite" / "on DynamoDB Local":
// a figure that differs on one engine.
var engineExceptionOn = regexp.MustCompile(`\bon (dynalite|DynamoDB Local|moto)\b`)

// TestDocsNameEveryEngineWithoutAllOld: a failed conditional write returns
// the item it found (ALL_OLD) on DynamoDB and moto only, so a duplicate or
// replay that reads it back costs one round trip more on every other
// engine of the engine table. A document line that gives a round trip
// count an exception on one engine ("1, 2 on dynalite") names every engine
// without ALL_OLD, not one of them: the engines differ in nothing else
// there.
func TestDocsNameEveryEngineWithoutAllOld(t *testing.T) {
	var without []string
	for _, e := range emulator.Engines() {
		if !e.Caps.ReturnsOldOnConditionFailure {
			without = append(without, e.Label)
		}
	}
	if len(without) == 0 {
		t.Skip("every engine returns ALL_OLD")
	}
	for _, doc := range markdownFiles(t) {
		switch filepath.Base(doc) {
		case "RED_TEAM.md", "performance-history.md": // dated history
			continue
		}
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(strings.ToLower(line), "round trip") && !strings.Contains(line, "ALL_OLD") {
				continue
			}
			named := false
			for _, m := range engineExceptionOn.FindAllStringSubmatch(line, -1) {
				named = named || slices.Contains(without, m[1])
			}
			if !named {
				continue
			}
			for _, label := range without {
				if !strings.Contains(line, label) {
					t.Errorf("%s:%d gives a round-trip count on an engine without ALL_OLD but leaves out %s, which has none either: %.160s", doc, i+1, label, line)
				}
			}
		}
	}
}

// sourceDocRef is a repository document named in code, the template or
// the Makefile: docs/X.md, a package's README or CHECKLIST, or a root page.
var sourceDocRef = regexp.MustCompile(`\b(?:docs/[A-Za-z_-]+|(?:[a-z]+/)+(?:README|CHECKLIST|QUICKSTART)|README|CONTRIBUTING)\.md\b`)

// TestSourcesNameExistingDocs: every repository document that a doc
// comment, CLI help text, error message, template.yaml, samconfig.toml or
// the Makefile names (docs/CONFIGURATION.md, ledger/CHECKLIST.md, ...)
// exists, so a renamed page leaves no help text pointing at nothing (the
// Markdown files' own links are TestReadmeIsAPath's).
func TestSourcesNameExistingDocs(t *testing.T) {
	files := []string{"template.yaml", "samconfig.toml", "Makefile"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata" || path == "bin" || path == "tools" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range sourceDocRef.FindAllString(string(b), -1) {
			if strings.HasPrefix(ref, "shared/") {
				continue // the reference data beside the clone
			}
			if _, err := os.Stat(ref); err != nil {
				t.Errorf("%s names %s: %v", f, ref, err)
			}
		}
	}
}
