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
