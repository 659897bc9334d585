package idemkit_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// allowlistPattern is the WebhookAllowlist parameter's AllowedPattern in
// template.yaml, compiled. CloudFormation matches it (a Java regular
// expression) against the whole value; it is written in the subset Java
// and Go read alike (classes, groups, counted repeats, alternation).
func allowlistPattern(t *testing.T) *regexp.Regexp {
	t.Helper()
	var doc struct {
		Parameters map[string]struct {
			Default               *string `yaml:"Default"`
			AllowedPattern        string  `yaml:"AllowedPattern"`
			ConstraintDescription string  `yaml:"ConstraintDescription"`
		} `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	p := doc.Parameters["WebhookAllowlist"]
	if p.AllowedPattern == "" || p.ConstraintDescription == "" {
		t.Fatalf("WebhookAllowlist: AllowedPattern %q, ConstraintDescription %q; want both", p.AllowedPattern, p.ConstraintDescription)
	}
	if !strings.HasPrefix(p.AllowedPattern, "^") || !strings.HasSuffix(p.AllowedPattern, "$") {
		t.Fatalf("WebhookAllowlist AllowedPattern %q is not anchored at both ends", p.AllowedPattern)
	}
	if strings.Contains(p.AllowedPattern, "(?") || strings.Contains(p.AllowedPattern, `\s`) || strings.Contains(p.AllowedPattern, `\d`) {
		t.Fatalf("WebhookAllowlist AllowedPattern uses a construct Java and Go read differently")
	}
	re, err := regexp.Compile(p.AllowedPattern)
	if err != nil {
		t.Fatal(err)
	}
	if p.Default == nil || !re.MatchString(*p.Default) {
		t.Fatalf("WebhookAllowlist Default %v is refused by its own pattern", p.Default)
	}
	return re
}

// allowlistLoads says whether the functions take WEBHOOK_ALLOWLIST=v
// without a warning (settings.LoadEnv, as every function's cold start).
func allowlistLoads(t *testing.T, v string) bool {
	t.Helper()
	e, err := settings.LoadEnv(func(k string) string {
		if k == "WEBHOOK_ALLOWLIST" {
			return v
		}
		return ""
	})
	if err != nil {
		t.Fatalf("WEBHOOK_ALLOWLIST=%q: LoadEnv = %v, want no error (an entry that is no host is a warning)", v, err)
	}
	return len(e.Warnings) == 0
}

// TestWebhookAllowlistPatternIsTheFunctionsCheck: the template's
// WebhookAllowlist parameter refuses at deploy time (before any resource
// changes) exactly the values the functions would warn of at every cold
// start, an entry that is no host matching no destination (RED_TEAM 362,
// 374, 640): the pattern is read from template.yaml and compared with
// settings.LoadEnv over the settings tests' entries, edge cases (label and
// IPv6 forms, whitespace, empty entries) and some thousands of generated
// values, so the two cannot drift apart. Two differences are pinned: a
// name over 253 characters passes the pattern (its length is beyond a
// plain regular expression) and is left to the run-time warning and its
// metric; a value with characters outside ASCII (a no-break space, the
// Kelvin sign the functions lower-case to "k") is refused by the pattern
// though the functions would take it.
func TestWebhookAllowlistPatternIsTheFunctionsCheck(t *testing.T) {
	re := allowlistPattern(t)
	same := func(v string) {
		t.Helper()
		if got, want := re.MatchString(v), allowlistLoads(t, v); got != want {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: the template's pattern allows it = %v, the functions take it without a warning = %v", v, got, want)
		}
	}
	label63 := strings.Repeat("a", 63)
	for _, v := range []string{
		// The settings tests' entries (TestWebhookAllowlistEntriesAreHosts).
		"https://hooks.example.com", "hooks.example.com:443", "hooks.example.com/path", "[", "[::1]",
		"*example.com", "hooks.*.example.com", "*", "*.", "a..b", "-a.example.com", "a b.example.com", "user@example.com",
		"hooks.example.com, https://other.example.com",
		"a.com, *.b.com", "Hooks.Example.COM", "hooks.example.com.", "203.0.113.7,2001:db8::1",
		"xn--bcher-kva.example,a-b.c9", " a.com ,, *.b.com , localhost",
		// Edge cases.
		"", " ", ",", " , ,\t,", "a", "_dmarc.example.com", "a-", "a_", "-", "_", ".", "..", "a.", "a..", ".a",
		"*.a", "*.a.", "*.*.a", "**.a", "*a", "a*", "*.-a", "*.a-",
		label63 + ".com", label63 + "a.com", "a-" + strings.Repeat("b", 60) + "-c", "a-" + strings.Repeat("b", 61) + "-c",
		"0.0.0.0", "255.255.255.255", "256.1.1.1", "01.2.3.4", "1.2.3", "1.2.3.4.", "1.2.3.4:80",
		"::", "::1", "1::", "1::2", "::ffff:1.2.3.4", "::ffff:01.2.3.4", "::ffff:256.2.3.4", "::1.2.3.4",
		"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8",
		"1:2:3:4::5:6:7:8", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5::1.2.3.4", "1:2:3:4:5:6::1.2.3.4", "::2:3:4:5:6:1.2.3.4",
		"FE80::1", "fe80::1%eth0", "12345::1", "0000:0000::0001", ":1", "1:", ":::", "1:::2", "1::2::3",
		"::1.", "[::1]:443", "a.com,", ",a.com", "a.com b.com", "a.com;b.com", "\ta.com\n", "a.com\v,\fb.com\r",
	} {
		same(v)
	}

	// Generated values: tokens of entries glued at random, so names,
	// addresses, separators and near misses of each come up.
	tokens := []string{"a", "Z", "0", "9", "1", "f", "F", "g", "-", "_", ".", "*.", "*", ":", "::", ",", " ", "\t",
		"255", "256", "01", "ffff", "12345", "1.2.3.4", "/", "@", "[", "]", "%", "xn--", ".com", "a.b"}
	r := rand.New(rand.NewPCG(640, 641))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := 1 + r.IntN(12); n > 0; n-- {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		same(b.String())
	}
	// IPv6 forms: one to nine groups, "::" anywhere, an IPv4 tail or not.
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := 1 + r.IntN(9); n > 0; n-- {
			b.WriteString([]string{"1", "ab", "0", "ffff", "12345", "g"}[r.IntN(6)])
			b.WriteString([]string{":", ":", ":", "::"}[r.IntN(4)])
		}
		switch r.IntN(3) {
		case 0:
			b.WriteString("1.2.3.4")
		case 1:
			b.WriteString("2")
		}
		v := b.String()
		if r.IntN(4) == 0 {
			v = strings.TrimPrefix(v, "1")
		}
		same(v)
	}

	// The pinned differences.
	long := strings.TrimSuffix(strings.Repeat(label63+".", 4), ".") // 255 characters
	if !re.MatchString(long) || allowlistLoads(t, long) {
		t.Errorf("a %d-character name: pattern %v, functions %v; want the pattern to pass it and the functions to warn", len(long), re.MatchString(long), allowlistLoads(t, long))
	}
	for _, v := range []string{"\u00a0a.com", "\u212a.com"} {
		if re.MatchString(v) || !allowlistLoads(t, v) {
			t.Errorf("WEBHOOK_ALLOWLIST=%q: pattern %v, functions %v; want the pattern to refuse what the functions take", v, re.MatchString(v), allowlistLoads(t, v))
		}
	}
}
