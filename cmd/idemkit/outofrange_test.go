package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestOutOfRangeNumberSaysSo: a numeric flag given a number written as the
// flag takes it (decimal digits, a duration with its unit) but too large
// (or too far below zero) for it is told the value is out of range,
// naming the largest the flag accepts, not that it is not a number
// (RED_TEAM 432). Every numeric flag of every command is tried: the
// flags whose help line names their value a duration or N (a whole
// number), and --grace, a duration read as text.
func TestOutOfRangeNumberSaysSo(t *testing.T) {
	numeric := regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*) (duration|N|int|uint|float)$`)
	largest := map[string]string{ // the flag's largest value, as the refusal names it
		"limit":            "9223372036854775807",
		"request-timeout":  "2562047h47m16.854775807s",
		"authorizer-ttl":   "2562047h47m16.854775807s",
		"idempotency-wait": "1m",
		"timeout":          "2562047h47m16.854775807s",
		"stagger":          "2562047h47m16.854775807s",
	}
	seen := map[string]bool{}
	for _, cmd := range [][]string{{"dev"}, {"tables", "create"}, {"doctor"}, {"apikey", "create"}, {"apikey", "revoke"},
		{"webhook", "secret", "rotate"}, {"webhook", "secret", "remove"}, {"conform"}, {"effects", "list"}, {"effects", "show"},
		{"effects", "resolve"}, {"version"}} {
		var help, discard bytes.Buffer
		if code := run(context.Background(), append(append([]string{}, cmd...), "-h"), &help, &discard); code != 0 {
			t.Fatalf("idemkit %s -h: exit %d", strings.Join(cmd, " "), code)
		}
		for _, m := range numeric.FindAllStringSubmatch(help.String(), -1) {
			name, kind := m[1], m[2]
			seen[name] = true
			big, small := "99999999999999999999", "-99999999999999999999"
			if kind == "duration" {
				big, small = "9999999999h", "-9999999999h"
			}
			want, ok := largest[name]
			if !ok {
				t.Errorf("idemkit %s: numeric flag --%s has no largest value in this test; add it", strings.Join(cmd, " "), name)
				continue
			}
			for _, v := range []string{big, small, "--" + name + "=" + big} {
				args := append(append([]string{}, cmd...), "--"+name, v)
				if strings.HasPrefix(v, "--") {
					args = append(append([]string{}, cmd...), v)
				}
				if cmd[0] == "conform" {
					args = append(args, "--api-key", "k", "http://127.0.0.1:1")
				}
				var out, errb bytes.Buffer
				code := run(context.Background(), args, &out, &errb)
				lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
				ok := code == 2 && out.Len() == 0 && len(lines) == 2 && strings.Contains(lines[0], "--"+name) &&
					strings.Contains(lines[0], "out of range") && !strings.Contains(lines[0], "parse error") &&
					!strings.Contains(lines[0], "want a whole number in decimal digits") && !strings.Contains(lines[0], "with its unit")
				if v != small {
					ok = ok && strings.Contains(lines[0], "the largest accepted is "+want)
				} else {
					ok = ok && strings.Contains(lines[0], "not negative")
				}
				if !ok {
					t.Errorf("idemkit %q: exit %d stdout %q stderr %q; want exit 2 and one line naming --%s, saying the value is out of range (the largest accepted %s; not negative)",
						args, code, out.String(), errb.String(), name, want)
				}
			}
		}
	}
	for name := range largest {
		if !seen[name] {
			t.Errorf("--%s is no numeric flag of any command's help: the help lost its type, or the flag is gone", name)
		}
	}
	// --grace is a duration read as text, within 1m..720h (or 0).
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "9999999999h", "--endpoint", "http://127.0.0.1:1"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "720h") {
		t.Errorf("--grace 9999999999h: exit %d stderr %q; want exit 2 naming 720h, the largest grace", code, errb.String())
	}
	// A value that is no number at all is still told what the flag takes.
	for _, c := range []struct{ args []string }{
		{[]string{"dev", "--request-timeout", "9999999999x"}},
		{[]string{"dev", "--request-timeout", "99999999999999999999"}}, // digits without a unit
		{[]string{"effects", "list", "--limit", "099999999999999999999"}},
		{[]string{"effects", "list", "--limit", "+99999999999999999999"}},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != 2 || strings.Contains(errb.String(), "out of range") || !strings.Contains(errb.String(), "want a") {
			t.Errorf("idemkit %q: exit %d stderr %q; want exit 2 saying what the flag takes, not out of range", c.args, code, errb.String())
		}
	}
}
