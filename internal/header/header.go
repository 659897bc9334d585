// Package header reads API Gateway header maps, whose names arrive in any
// case: every lookup matches names case-insensitively.
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

// AppendValues appends the values of every header named name in h to dst
// and returns the extended slice: Values into a caller's buffer.
func AppendValues(dst []string, h map[string]string, name string) []string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			dst = append(dst, v)
		}
	}
	return dst
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
