package idemkit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

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
	// mdLink is an inline link or image, with or without a title:
	// [text](target) or [text](target "title").
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// mdHeading is an ATX heading (up to three spaces before it), its
	// closing #s left out.
	mdHeading = regexp.MustCompile(`(?m)^ {0,3}#{1,6} (.+?)(?: +#+)? *$`)
	// mdHTMLAnchor is an explicit anchor: <a id="x"> or <a name="x">.
	mdHTMLAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// mdInlineLink is a link inside a heading: GitHub's anchor keeps its
	// text only.
	mdInlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	mdFenceOpen  = regexp.MustCompile("^\\s*(```+|~~~+)")
)

// stripFences blanks out every fenced code block (``` or ~~~, indented
// in a list item or not): a link or a '#' line inside one is code, not
// a link or a heading. The lines are kept, empty, so that line numbers
// hold.
func stripFences(text string) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		if fence == "" {
			if m := mdFenceOpen.FindStringSubmatch(l); m != nil {
				fence = m[1]
				lines[i] = ""
			}
			continue
		}
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
			fence = ""
		}
		lines[i] = ""
	}
	return strings.Join(lines, "\n")
}

func checkLinks(t *testing.T, doc string) {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := stripFences(string(b))
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

// hasAnchor reports whether the Markdown file at path has the anchor: the
// one GitHub gives a heading (see slug; the second heading of one text gets
// "-1" after it, the third "-2", ...) or an explicit <a id> or <a name>.
func hasAnchor(t *testing.T, path, anchor string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(anchors(string(b)), anchor)
}

// anchors lists the anchors of a Markdown text, in order.
func anchors(text string) []string {
	text = stripFences(text)
	var out []string
	seen := map[string]int{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, n))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	for _, m := range mdHTMLAnchor.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	return out
}

// slug is the anchor GitHub gives a heading: the text of its links, lower
// case, letters, digits, '-' and '_' kept (in any script), spaces as '-',
// every other character (punctuation and symbols such as '—', '×', '→',
// '§', '…' as well as ASCII's) dropped.
func slug(heading string) string {
	heading = mdInlineLink.ReplaceAllString(heading, "$1")
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
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

// TestMarkdownAnchorsAreGitHubs: the link check finds anchors where GitHub
// puts them, so a link it passes works on GitHub: punctuation and symbols
// outside ASCII dropped like ASCII's, a repeated heading numbered, a '#'
// line inside a fenced block (indented in a list item, or ~~~) no heading,
// a link inside a heading read as its text.
func TestMarkdownAnchorsAreGitHubs(t *testing.T) {
	text := strings.Join([]string{
		"# functions/ — the reference host",
		"## Engine × behaviour",
		"## Setup",
		"- a step:",
		"",
		"  ```sh",
		"  # not a heading",
		"  ```",
		"~~~",
		"# nor this",
		"~~~",
		"## Setup",
		"### See [the policies](POLICIES.md) ##",
		"  ## Indented heading",
		`<a id="explicit"></a>`,
	}, "\n")
	got := anchors(text)
	want := []string{"functions--the-reference-host", "engine--behaviour", "setup", "setup-1", "see-the-policies", "indented-heading", "explicit"}
	if !slices.Equal(got, want) {
		t.Errorf("anchors:\n got %q\nwant %q", got, want)
	}
	links := mdLink.FindAllStringSubmatch(stripFences("[a](x.md \"title\") and\n```\n[b](y.md)\n```\n[c](z.md#k)"), -1)
	var targets []string
	for _, m := range links {
		targets = append(targets, m[1])
	}
	if want := []string{"x.md", "z.md#k"}; !slices.Equal(targets, want) {
		t.Errorf("link targets outside fences: got %q, want %q", targets, want)
	}
}
