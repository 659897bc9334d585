package idemkit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/testutil"
)

// readmeMaxLines bounds README.md: it is a path (install, the two commands,
// a quickstart, your function, your worker, calling it, deploying); the
// reference material lives in docs/.
const readmeMaxLines = 400

// TestReadmeIsAPath: README.md stays within readmeMaxLines lines; every
// relative link of every Markdown file of the repository (README.md,
// docs/, each package's README and CHECKLIST, the quickstart) resolves (the
// file exists, and an anchor names a heading of it); every output block
// README.md shows is marked with the test that produces it, and that test
// reads it.
func TestReadmeIsAPath(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(readme), "\n"); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move reference material to docs/ and link it", n, readmeMaxLines)
	}
	docs := markdownFiles(t)
	if !slices.Contains(docs, "README.md") || !slices.Contains(docs, filepath.Join("docs", "DEPLOYING.md")) {
		t.Fatalf("Markdown files found: %q, want README.md and docs/DEPLOYING.md among them", docs)
	}
	for _, doc := range docs {
		checkLinks(t, doc)
	}
	checkShownOutputs(t, string(readme))
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	mdFence   = regexp.MustCompile("(?ms)^```.*?^```")
)

func checkLinks(t *testing.T, doc string) {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := mdFence.ReplaceAllString(string(b), "")
	for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		path := doc
		if file != "" {
			path = filepath.Join(filepath.Dir(doc), file)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s links %q: %v", doc, target, err)
			continue
		}
		if anchor == "" || st.IsDir() {
			continue
		}
		if !strings.HasSuffix(path, ".md") {
			t.Errorf("%s links %q: an anchor into a file that is not Markdown", doc, target)
			continue
		}
		if !hasAnchor(t, path, anchor) {
			t.Errorf("%s links %q: %s has no heading with that anchor", doc, target, path)
		}
	}
}

// hasAnchor reports whether a heading of the Markdown file at path has the
// anchor GitHub gives it: lower case, punctuation other than '-' and '_'
// dropped, spaces as '-'.
func hasAnchor(t *testing.T, path, anchor string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(string(b), ""), -1) {
		if slug(m[1]) == anchor {
			return true
		}
	}
	return false
}

func slug(heading string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// checkShownOutputs: every output block (a fence without a language) in
// the README is marked testutil.ShownMarker(name), and a test file of the
// repository reads that name (testutil.ShownOutput) to compare it with what
// the steps really print.
func checkShownOutputs(t *testing.T, readme string) {
	t.Helper()
	tests := testSources(t)
	inFence := false
	lines := strings.Split(readme, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "```") {
			continue
		}
		if inFence {
			inFence = false
			continue
		}
		inFence = true
		if l != "```" {
			continue
		}
		prev := ""
		if i > 0 {
			prev = lines[i-1]
		}
		name, ok := strings.CutPrefix(prev, "<!-- output: ")
		name, ok2 := strings.CutSuffix(name, " -->")
		if !ok || !ok2 {
			t.Errorf("README.md line %d: an output block not marked with the test that produces it (%s)", i+1, testutil.ShownMarker("TestName/part"))
			continue
		}
		if !strings.Contains(tests, `"`+name+`"`) {
			t.Errorf("README.md line %d: no test reads the output marked %q", i+1, name)
		}
	}
}

// markdownFiles lists the repository's own Markdown files, sorted (the
// installed tools' and node packages' are not the repository's).
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var docs []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// testSources is the text of every _test.go file of the module.
func testSources(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sb.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}
