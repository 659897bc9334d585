// Package header reads API Gateway header maps, whose names arrive in any
// case: every lookup matches names case-insensitively; and what a
// Content-Type value names (IsJSON).
//
// A map may hold one header under more than one spelling ("Accept" and
// "accept": a Lambda event built by hand, or an integration that does not
// fold names). Every lookup then takes the spellings in the byte order of
// the names, never in Go's map order, which is random: a request's
// fingerprint, built from these values, is the same on every send of it.
package header

import (
	"slices"
	"strings"
)

// Values returns the values of every header named name in h, in the byte
// order of the spellings h holds it under.
func Values(h map[string]string, name string) []string { return AppendValues(nil, h, name) }

// AppendValues appends to dst the values of every header named name in h,
// in the byte order of the spellings h holds it under, and returns the
// extended slice. It allocates nothing beyond dst's growth unless h holds
// the name under more than one spelling.
func AppendValues(dst []string, h map[string]string, name string) []string {
	n := len(dst)
	for k, v := range h {
		if strings.EqualFold(k, name) {
			dst = append(dst, v)
		}
	}
	if len(dst)-n > 1 {
		dst = dst[:n]
		for _, k := range spellings(h, name) {
			dst = append(dst, h[k])
		}
	}
	return dst
}

// ValuesMulti returns the values of every header named name in a
// multi-value header map: each spelling's values in their order, the
// spellings in byte order.
func ValuesMulti(h map[string][]string, name string) []string {
	var out []string
	n := 0
	for k, v := range h {
		if strings.EqualFold(k, name) {
			out = append(out, v...)
			n++
		}
	}
	if n > 1 {
		out = out[:0]
		for _, k := range spellings(h, name) {
			out = append(out, h[k]...)
		}
	}
	return out
}

// spellings returns the names in h that match name, in byte order.
func spellings[V any](h map[string]V, name string) []string {
	var ks []string
	for k := range h {
		if strings.EqualFold(k, name) {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// First returns the value of a header named name in h ("" when none): when
// h holds the name under more than one spelling, the value of the least
// in byte order.
func First(h map[string]string, name string) string {
	var first, value string
	found := false
	for k, v := range h {
		if strings.EqualFold(k, name) && (!found || k < first) {
			first, value, found = k, v, true
		}
	}
	return value
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
