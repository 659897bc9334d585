package idemkit_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docFuzzCommand is a `go test ... -fuzz PATTERN ... ./pkg/` command a
// document gives, its pattern quoted or not.
var docFuzzCommand = regexp.MustCompile("go test [^`\n]*?-fuzz '?([^' `\n]+)'?[^`\n]*? (\\./[^ `\n]+)")

// fuzzTarget is a fuzz test's declaration.
var fuzzTarget = regexp.MustCompile(`(?m)^func (Fuzz[A-Za-z0-9_]*)\(`)

// TestDocFuzzCommandsMatchOneTarget: `go test -fuzz` refuses a pattern that
// matches more than one fuzz test of the package ("will not fuzz, -fuzz
// matches more than one fuzz test") or none, so every fuzz command a
// document gives matches exactly one fuzz test of the package it names
// (RED_TEAM 542: SECURITY.md's `-fuzz FuzzHandle` matched FuzzHandle and
// FuzzHandleEnvelope and fuzzed nothing).
func TestDocFuzzCommandsMatchOneTarget(t *testing.T) {
	found := 0
	for _, doc := range markdownFiles(t) {
		if filepath.Base(doc) == "RED_TEAM.md" { // the record quotes broken commands
			continue
		}
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docFuzzCommand.FindAllStringSubmatch(string(b), -1) {
			found++
			pattern, pkg := m[1], strings.TrimSuffix(strings.TrimPrefix(m[2], "./"), "/")
			re, err := regexp.Compile(pattern)
			if err != nil {
				t.Errorf("%s: -fuzz %s is no regular expression: %v", doc, pattern, err)
				continue
			}
			files, err := filepath.Glob(filepath.Join(pkg, "*_test.go"))
			if err != nil || len(files) == 0 {
				t.Errorf("%s: %q names package ./%s, which has no tests", doc, m[0], pkg)
				continue
			}
			var matched []string
			for _, f := range files {
				src, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, fm := range fuzzTarget.FindAllStringSubmatch(string(src), -1) {
					if re.MatchString(fm[1]) {
						matched = append(matched, fm[1])
					}
				}
			}
			if len(matched) != 1 {
				t.Errorf("%s: %q: -fuzz %s matches %d fuzz tests of ./%s %v, want exactly one (go test fuzzes nothing otherwise)", doc, m[0], pattern, len(matched), pkg, matched)
			}
		}
	}
	t.Logf("%d fuzz commands checked", found)
	if found == 0 {
		t.Fatal("no document gives a go test -fuzz command: the pattern no longer reads them")
	}
}
