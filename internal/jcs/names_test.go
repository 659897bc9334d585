package jcs

import (
	"strings"
	"testing"
)

// TestShortNamesAgainstOracle: member names of every length around the
// eight-byte word the parse loop reads a short name from (a plain ASCII
// name of up to seven bytes is taken from that one load), with an escape,
// a non-ASCII or invalid byte, a control character or a quote at each
// position, in objects that need no reordering, that do, that repeat the
// name, and that end (or are cut off) right after it: the same bytes,
// digests and errors as the reference implementation.
func TestShortNamesAgainstOracle(t *testing.T) {
	specials := []string{"", `\u0041`, `\"`, `\\`, "é", "\U0001F600", "\uFFFD", "\x80", "\x01", "\x7f", "~", " "}
	var names []string
	for n := 0; n <= 10; n++ {
		for _, sp := range specials {
			for p := 0; p <= n; p++ {
				names = append(names, strings.Repeat("m", p)+sp+strings.Repeat("m", n-p))
				if sp == "" {
					break
				}
			}
		}
	}
	// Names equal in their first seven or eight bytes, ranked by the rest.
	names = append(names, "abcdefg", "abcdefh", "abcdefgh", "abcdefgg", "abcdef", `abcdefg\u0000`, "abcdefgé", "abcdefg\U0001F600")
	for _, name := range names {
		for _, in := range []string{
			`{"` + name + `":1}`,
			`{"` + name + `":1,"zz":2}`,
			`{"zz":1,"` + name + `":2}`,
			`{"zz":1,"` + name + `":2,"a":3}`,
			`{"` + name + `":1,"` + name + `":2}`,
			`{"` + name + `" :1}`,
			`{"` + name + `"`,
			`{"` + name,
			`[{"` + name + `":{"` + name + `":[1]}},{"a":"\u00e9","` + name + `":true}]`,
		} {
			sameAsOracle(t, []byte(in))
		}
	}
	for i, a := range names {
		if i+1 < len(names) {
			sameAsOracle(t, []byte(`{"`+names[i+1]+`":1,"`+a+`":2}`))
		}
	}
}
