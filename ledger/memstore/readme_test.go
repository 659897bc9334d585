package memstore_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// The allocation ceilings of TestDoAllocations (allocs_test.go, built
// without the race detector); ledger/README.md states them.
const (
	firstEffectAllocs = 39
	duplicateAllocs   = 9
)

// TestLedgerReadmeStatesTheAllocationCeilings: ledger/README.md's
// benchmark section gives the ceilings TestDoAllocations pins.
func TestLedgerReadmeStatesTheAllocationCeilings(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := regexp.MustCompile(`\s+`).ReplaceAllString(string(b), " ")
	for _, want := range []string{
		fmt.Sprintf("(`TestDoAllocations` pins at most %d)", firstEffectAllocs),
		fmt.Sprintf("`TestDoAllocations` (at most %d for a first effect, its identity computed, and %d for a duplicate)", firstEffectAllocs, duplicateAllocs),
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("ledger/README.md does not say %q (the ceilings of allocs_test.go)", want)
		}
	}
}
