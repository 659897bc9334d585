// The race detector drops sync.Pool items at random, so allocation counts
// mean nothing under it: this pin is built without it only (the allocs
// check step of make test runs it).

//go:build !race

package jcs

import (
	"strings"
	"testing"
)

// TestSum256AllocationsDoNotGrow: the digest allocates nothing in the
// steady state, whatever the size of the body (up to the 6 MB a Lambda
// function can receive).
func TestSum256AllocationsDoNotGrow(t *testing.T) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20, 6 << 20} {
		for _, in := range [][]byte{rowsBody(size), testBody(size), []byte("[" + strings.TrimSuffix(strings.Repeat(`{"b":1,"a":"x"},`, size/16), ",") + "]")} {
			if _, err := Sum256Exact(in); err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(5, func() { _, _ = Sum256Exact(in) }); a != 0 {
				t.Errorf("Sum256Exact on %d bytes: %v allocs/op, want 0", len(in), a)
			}
		}
	}
}
