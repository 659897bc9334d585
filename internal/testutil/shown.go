package testutil

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// ShownMarker is the comment that ties an output block of a document to the
// test producing it: "<!-- output: NAME -->" on the line before the block,
// NAME being the test (and a part of it: "TestReadmeQuickstart/replay").
func ShownMarker(name string) string { return "<!-- output: " + name + " -->" }

// ShownOutput returns the output block of the Markdown file at path that is
// marked ShownMarker(name); the test fails when there is none.
func ShownOutput(t testing.TB, path, name string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, ShownMarker(name)+"\n```\n")
	if i < 0 {
		t.Fatalf("%s shows no output marked %s", path, ShownMarker(name))
	}
	s = s[i+len(ShownMarker(name))+5:]
	j := strings.Index(s, "```\n")
	if j < 0 {
		t.Fatalf("%s: the output marked %s is not closed", path, name)
	}
	return s[:j]
}

// MatchShown reports whether got contains the shown output: every line of
// shown matches a line of got, in order (other lines of got may come in
// between: shown output is abbreviated), "…" in a shown line standing for
// any text.
func MatchShown(shown, got string) error {
	lines := strings.Split(strings.ReplaceAll(got, "\r\n", "\n"), "\n")
	at := 0
	for _, want := range strings.Split(strings.TrimRight(shown, "\n"), "\n") {
		parts := strings.Split(want, "…")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
		for at < len(lines) && !re.MatchString(lines[at]) {
			at++
		}
		if at == len(lines) {
			return fmt.Errorf("shown line %q is not in the output (in order):\n%s", want, got)
		}
		at++
	}
	return nil
}
