package header

import (
	"slices"
	"testing"
)

func TestNamesMatchInAnyCase(t *testing.T) {
	h := map[string]string{"content-type": "application/json", "X-Other": "1"}
	if got := First(h, "Content-Type"); got != "application/json" {
		t.Fatalf("First = %q", got)
	}
	if got := First(h, "Accept"); got != "" {
		t.Fatalf("First of an absent header = %q, want empty", got)
	}
	got := Values(map[string]string{"a": "1", "A": "2", "b": "3"}, "a")
	slices.Sort(got)
	if !slices.Equal(got, []string{"1", "2"}) {
		t.Fatalf("Values = %v", got)
	}
	multi := ValuesMulti(map[string][]string{"Via": {"x", "y"}, "VIA": {"z"}}, "via")
	slices.Sort(multi)
	if !slices.Equal(multi, []string{"x", "y", "z"}) {
		t.Fatalf("ValuesMulti = %v", multi)
	}
}

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                true,
		"Application/JSON; charset=utf-8": true,
		" application/problem+json ":      true,
		"application/vnd.api+JSON":        true,
		"+json":                           false,
		"text/plain":                      false,
		"application/jsonl":               false,
		"":                                false,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}

// TestSpellingsInOneOrder: a map holding one header under more than one
// spelling gives its values in the order of the spellings' bytes, every
// time (Go's map iteration order is random), and First the value of the
// least spelling: a request's fingerprint, which appends these values,
// is the same on every send of it (RED_TEAM 382).
func TestSpellingsInOneOrder(t *testing.T) {
	h := map[string]string{"x-method-override": "DELETE", "X-Method-Override": "PUT", "X-METHOD-OVERRIDE": "GET", "other": "1"}
	multi := map[string][]string{"x-method-override": {"DELETE", "POST"}, "X-Method-Override": {"PUT"}, "X-METHOD-OVERRIDE": {"GET"}}
	for i := 0; i < 64; i++ {
		if got := Values(h, "X-Method-Override"); !slices.Equal(got, []string{"GET", "PUT", "DELETE"}) {
			t.Fatalf("send %d: Values = %v, want [GET PUT DELETE] (by spelling: X-METHOD-OVERRIDE, X-Method-Override, x-method-override)", i, got)
		}
		if got := ValuesMulti(multi, "x-method-override"); !slices.Equal(got, []string{"GET", "PUT", "DELETE", "POST"}) {
			t.Fatalf("send %d: ValuesMulti = %v, want [GET PUT DELETE POST] (each spelling's values in their order)", i, got)
		}
		if got := First(h, "x-method-override"); got != "GET" {
			t.Fatalf("send %d: First = %q, want the least spelling's GET", i, got)
		}
	}
}
