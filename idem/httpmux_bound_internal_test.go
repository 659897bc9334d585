package idem

import (
	"fmt"
	"net/http/httptest"
	"testing"
)

// A custom router that names each request's own path as its pattern must
// not grow the process's memory with every path: the one-pattern matchers
// kept are bounded, and a pattern beyond the bound still gives the path
// values a ServeMux would.
func TestPatternMatchersAreBounded(t *testing.T) {
	for i := 0; i < maxPatternMatchers+500; i++ {
		path := fmt.Sprintf("/bound/%d/{id}", i)
		r := httptest.NewRequest("POST", fmt.Sprintf("/bound/%d/x%d", i, i), nil)
		values, ok := pathValues("POST "+path, r)
		if !ok || values("id") != fmt.Sprintf("x%d", i) {
			t.Fatalf("pattern %d: ok %v, id %q", i, ok, values("id"))
		}
	}
	n := 0
	patternMatchers.Range(func(any, any) bool { n++; return true })
	if n > maxPatternMatchers {
		t.Fatalf("%d one-pattern matchers kept, more than the bound %d", n, maxPatternMatchers)
	}
}
