package idem

import (
	"strconv"
	"strings"
)

// credentialScope extends a tenant scope with the policy's credential parts
// (Policy.Scope.Credential): every name and value is length-prefixed, and
// the "tenant+:" prefix differs from every scope without credential parts
// ("tenant:", "anon:"), so two different credentials never share a scope.
func credentialScope(tenant string, names, values []string) string {
	var b strings.Builder
	b.WriteString("tenant+:")
	for _, s := range append([]string{tenant}, interleave(names, values)...) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

func interleave(names, values []string) []string {
	out := make([]string, 0, 2*len(names))
	for i := range names {
		out = append(out, names[i], values[i])
	}
	return out
}
