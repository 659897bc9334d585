package ids

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func TestGrammars(t *testing.T) {
	opaque := strings.Repeat("a", 16)
	for _, c := range []struct {
		name string
		ok   bool
		got  bool
	}{
		{"tenant", true, ValidTenant("acme")},
		{"anon tenant", true, ValidTenant("anon:x")},
		{"tenant with slash", false, ValidTenant("a/b")},
		{"empty tenant", false, ValidTenant("")},
		{"long tenant", false, ValidTenant(strings.Repeat("a", 129))},
		{"runId", true, ValidRunID("acme/" + opaque)},
		{"short opaque", false, ValidRunID("acme/" + opaque[1:])},
		{"effectId", true, ValidEffectID("anon:x/" + opaque)},
		{"effectId without tenant", false, ValidEffectID(opaque)},
		{"nodeId with colon", true, ValidNodeID("a:b")},
		{"nodeId with slash", false, ValidNodeID("a/b")},
		{"key", true, ValidKey(strings.Repeat("k", 22))},
		{"short key", false, ValidKey(strings.Repeat("k", 21))},
		{"key with colon", false, ValidKey(strings.Repeat("k", 21) + ":")},
	} {
		if c.got != c.ok {
			t.Errorf("%s: valid = %v, want %v", c.name, c.got, c.ok)
		}
	}
}

// grammarCases are strings at every boundary of the four grammars: lengths
// just inside and outside each bound, the "anon:" prefix whole, doubled and
// cut, the separator missing, doubled or at either end, each character
// class member and characters just outside it.
func grammarCases() []string {
	rep := func(c string, n int) string { return strings.Repeat(c, n) }
	cases := []string{"", "a", "anon:", "anon:a", "anon:anon:a", "anon", "ano:a", ":a", "a:", "a:b",
		"/", "a/", "/" + rep("b", 16), "a//" + rep("b", 16), "a/b/" + rep("c", 16), "anon:/" + rep("b", 16),
		"a\n", "a\x00", "é", "a b", "A-Z.a_z~0-9", "ü" + rep("a", 20)}
	for _, n := range []int{1, 15, 16, 17, 21, 22, 23, 63, 64, 65, 127, 128, 129, 200} {
		for _, c := range []string{"a", "Z", "9", ".", "_", "~", "-", ":", "/", "+", "="} {
			cases = append(cases, rep(c, n), "anon:"+rep(c, n), "t/"+rep(c, n), rep(c, n)+"/"+rep("x", 16), "anon:"+rep(c, n)+"/"+rep("k", n))
		}
	}
	for c := 0; c < 256; c++ {
		cases = append(cases, rep("a", 21)+string(rune(c)), string([]byte{byte(c)}), "t/"+rep("o", 15)+string([]byte{byte(c)}))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aZ09._~-:/+= \nanon:"
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(140))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if rng.IntN(3) == 0 {
			b = append([]byte("anon:"), b...)
		}
		cases = append(cases, string(b))
	}
	return cases
}

// TestMatchersAgreeWithTheGrammars: each byte matcher accepts exactly what
// its grammar, compiled as a regular expression, accepts.
func TestMatchersAgreeWithTheGrammars(t *testing.T) {
	for _, g := range []struct {
		grammar string
		valid   func(string) bool
	}{
		{TenantGrammar, ValidTenant},
		{MintTenantGrammar, MintableTenant},
		{TenantBoundGrammar, ValidRunID},
		{TenantBoundGrammar, ValidEffectID},
		{NodeGrammar, ValidNodeID},
		{KeyGrammar, ValidKey},
	} {
		re := regexp.MustCompile(g.grammar)
		for _, s := range grammarCases() {
			if got, want := g.valid(s), re.MatchString(s); got != want {
				t.Errorf("%s on %q: matcher %v, grammar %v", g.grammar, s, got, want)
			}
		}
	}
}

func BenchmarkValidKey(b *testing.B) {
	k := strings.Repeat("k", 40)
	for i := 0; i < b.N; i++ {
		if !ValidKey(k) {
			b.Fatal("rejected")
		}
	}
}
