package ledger

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestFieldMatchersAgree: the byte matchers of Do's free-form fields accept
// exactly what their grammars, compiled as regular expressions, accept: at
// every length bound, for every byte, and on random strings over the
// classes' edges.
func TestFieldMatchersAgree(t *testing.T) {
	var cases []string
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129} {
		for _, c := range []string{"a", "Z", "9", ".", "_", "~", "-", ":", "/", "+", "=", " "} {
			cases = append(cases, strings.Repeat(c, n), "sha256:"+strings.Repeat(c, n))
		}
	}
	for c := 0; c < 256; c++ {
		cases = append(cases, string([]byte{byte(c)}), "ab"+string([]byte{byte(c)})+"cd")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "aZ09._~-:/+= \n\x00é"
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(140))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, g := range []struct {
		grammar string
		valid   func(string) bool
	}{
		{invocationGrammar, validInvocation},
		{digestGrammar, validDigest},
		{recipeGrammar, validRecipe},
	} {
		re := regexp.MustCompile(g.grammar)
		for _, s := range cases {
			if got, want := g.valid(s), re.MatchString(s); got != want {
				t.Errorf("%s on %q: matcher %v, grammar %v", g.grammar, s, got, want)
			}
		}
	}
}
