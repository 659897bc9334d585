package ids

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// ruleChars returns the characters a rule in words names after "N..M of "
// up to the first " (" or ",": ranges such as A-Z, and single characters.
func ruleChars(t *testing.T, words string) map[byte]bool {
	t.Helper()
	for _, stop := range []string{" (", ","} {
		if i := strings.Index(words, stop); i >= 0 {
			words = words[:i]
		}
	}
	out := map[byte]bool{}
	for _, f := range strings.Fields(words) {
		switch {
		case len(f) == 3 && f[1] == '-':
			for c := f[0]; c <= f[2]; c++ {
				out[c] = true
			}
		case len(f) == 1:
			out[f[0]] = true
		default:
			t.Fatalf("rule %q: %q is neither a range nor a character", words, f)
		}
	}
	return out
}

// TestRulesInWordsMatchTheGrammars: each grammar's rule in words, which
// the CLI's usage errors quote in its place, names the lengths and exactly
// the characters the grammar accepts (RED_TEAM 327's words kept in step
// with the expressions they stand for).
func TestRulesInWordsMatchTheGrammars(t *testing.T) {
	opaque := strings.Repeat("a", 16)
	for _, c := range []struct {
		name, grammar, words string
		min, max             int
		wrap                 func(s string) string // the value the grammar reads, built around s
	}{
		{"tenant", TenantGrammar, TenantRule, 1, 128, func(s string) string { return s }},
		{"mintable tenant", MintTenantGrammar, MintTenantRule, 1, 128, func(s string) string { return s }},
		{"tenant-bound id, tenant part", TenantBoundGrammar, strings.TrimPrefix(TenantBoundRule, "TENANT/ID: a tenant ("), 1, 128, func(s string) string { return s + "/" + opaque }},
		{"tenant-bound id, id part", TenantBoundGrammar, TenantBoundRule[strings.LastIndex(TenantBoundRule, "then ")+len("then "):], 16, 128, func(s string) string { return "acme/" + s }},
	} {
		t.Run(c.name, func(t *testing.T) {
			re := regexp.MustCompile(c.grammar)
			prefix := fmt.Sprintf("%d..%d of ", c.min, c.max)
			if !strings.HasPrefix(c.words, prefix) {
				t.Fatalf("%q does not start %q", c.words, prefix)
			}
			chars := ruleChars(t, strings.TrimPrefix(c.words, prefix))
			for b := 0x20; b < 0x7f; b++ {
				v := c.wrap(strings.Repeat(string(rune(b)), c.min))
				if got := re.MatchString(v); got != chars[byte(b)] {
					t.Errorf("%q: the grammar accepts it %v, the words %q say %v", rune(b), got, c.words, chars[byte(b)])
				}
			}
			if !re.MatchString(c.wrap(strings.Repeat("a", c.max))) || re.MatchString(c.wrap(strings.Repeat("a", c.max+1))) ||
				(c.min > 1 && re.MatchString(c.wrap(strings.Repeat("a", c.min-1)))) {
				t.Errorf("the grammar's lengths are not %d..%d as %q says", c.min, c.max, c.words)
			}
		})
	}
}
