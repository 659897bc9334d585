package idem_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The allocation ceilings of TestReplayAllocations and
// TestFirstExecutionAllocations (allocs_test.go, built without the race
// detector); README.md states them.
const (
	replayAllocs                 = 8
	noKeyAllocs                  = 8
	firstExecutionAllocs         = 13
	firstExecutionInLambdaAllocs = 11
)

// TestReadmeStatesTheAllocationCeilings: idem/README.md's allocation
// figures are the ceilings the tests pin, and the fuzz tests it names are
// the package's.
func TestReadmeStatesTheAllocationCeilings(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := regexp.MustCompile(`\s+`).ReplaceAllString(string(b), " ")
	want := fmt.Sprintf("at most %d for a replay, %d for a first execution (%d inside Lambda), %d for a request without a key",
		replayAllocs, firstExecutionAllocs, firstExecutionInLambdaAllocs, noKeyAllocs)
	if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(readme) {
		t.Errorf("idem/README.md does not say %q (the ceilings of allocs_test.go)", want)
	}
	src := ""
	files, _ := os.ReadDir(".")
	for _, f := range files {
		if strings.HasSuffix(f.Name(), "_test.go") {
			s, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			src += string(s)
		}
	}
	for _, name := range regexp.MustCompile("`(Fuzz[A-Za-z]+)`").FindAllStringSubmatch(readme, -1) {
		if name[1] == "FuzzCanonicalize" { // internal/jcs's, named as such
			continue
		}
		if !regexp.MustCompile(`(?m)^func ` + name[1] + `\(`).MatchString(src) {
			t.Errorf("idem/README.md names %s, which is no fuzz test of idem", name[1])
		}
	}
}
