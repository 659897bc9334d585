// Package header reads API Gateway header maps, whose names arrive in any
// case: every lookup matches names case-insensitively; and what a
// Content-Type value names (IsJSON).
package header

import "strings"

// Values returns the values of every header named name in h.
func Values(h map[string]string, name string) []string {
	var out []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			out = append(out, v)
		}
	}
	return out
}

// ValuesMulti returns the values of every header named name in a
// multi-value header map.
func ValuesMulti(h map[string][]string, name string) []string {
	var out []string
	for k, v := range h {
		if strings.EqualFold(k, name) {
			out = append(out, v...)
		}
	}
	return out
}

// First returns the value of a header named name in h ("" when none). When
// h holds the name in more than one case, which one is returned is
// unspecified.
func First(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// IsJSON reports whether the Content-Type value ct names JSON
// (application/json or any +json suffix, in any case, parameters ignored).
func IsJSON(ct string) bool {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	return strings.EqualFold(ct, "application/json") || (len(ct) > 5 && strings.EqualFold(ct[len(ct)-5:], "+json"))
}
