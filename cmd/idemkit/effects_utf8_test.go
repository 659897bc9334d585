package main

import (
	"context"
	"strings"
	"testing"
)

// TestEffectsResolveRefusesInvalidUTF8: the operator's name (--operator,
// or $IDEMKIT_OPERATOR) and the note are recorded on the resolution: bytes
// that are not UTF-8, and control characters (C1 ones too), are a usage
// error naming the flag (exit 2), before any table is reached.
func TestEffectsResolveRefusesInvalidUTF8(t *testing.T) {
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"operator flag", "", []string{"--operator", "ops\xff"}, "--operator"},
		{"operator flag, a cut sequence", "", []string{"--operator", "jos\xc3"}, "--operator"},
		{"operator from the environment", "ops\xfe", nil, "IDEMKIT_OPERATOR"},
		{"note", "ops", []string{"--note", "charge \xe2\x82 found"}, "--note"},
		{"operator with a C1 control", "", []string{"--operator", "ops\u009b31m"}, "--operator"},
		{"note with a C1 control", "ops", []string{"--note", "seen\u0085there"}, "--note"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errb := resolveWith(t, c.env, c.args)
			if code != 2 || !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "printable") {
				t.Fatalf("exit %d, stderr %q; want 2 and a usage error naming %s and UTF-8", code, errb.String(), c.want)
			}
		})
	}
}

// TestEffectsResolveRefusesABlankOperator: an operator identity that names
// no one (white space only, ASCII or not, or invisible format characters)
// is a usage error naming where it came from, before any table is
// reached: exit 2, two lines on stderr, nothing on stdout.
func TestEffectsResolveRefusesABlankOperator(t *testing.T) {
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"spaces", "", []string{"--operator", "   "}, "--operator"},
		{"one space", "", []string{"--operator", " "}, "--operator"},
		{"no-break and ideographic spaces", "", []string{"--operator", "\u00a0\u3000"}, "--operator"},
		{"zero-width space", "", []string{"--operator", "\u200b"}, "--operator"},
		{"environment: zero-width space", "\u200b\u200b", nil, "$IDEMKIT_OPERATOR"},
		// Set, to white space only: refused, never a silent fall back to
		// user@host, another identity than the one the operator set
		// (RED_TEAM 321).
		{"environment: spaces", "   ", nil, "$IDEMKIT_OPERATOR"},
		{"environment: a tab and a line break", "\t\n", nil, "$IDEMKIT_OPERATOR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errb := resolveWith(t, c.env, c.args)
			lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
			if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.Contains(lines[0], c.want) ||
				!strings.Contains(lines[0], "white space only") || lines[1] != "run 'idemkit effects resolve -h' for help" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and a usage error naming %s", code, out.String(), errb.String(), c.want)
			}
		})
	}
}

// resolveWith runs effects resolve of one effect, delivered at rev r1, on
// an endpoint nothing answers, with $IDEMKIT_OPERATOR set to env and args
// after the others: its exit status, stdout and stderr.
func resolveWith(t *testing.T, env string, args []string) (int, *strings.Builder, *strings.Builder) {
	t.Helper()
	const effect = "acme/3q9Xv0d2mJm8L1hZ1H3vO3n8cZkqv4pVwzXyq2Wc0bE"
	t.Setenv("IDEMKIT_OPERATOR", env)
	var out, errb strings.Builder
	all := append([]string{"effects", "resolve", effect, "--as", "delivered", "--rev", "r1",
		"--endpoint", "http://127.0.0.1:9", "--table", "EffectsTable"}, args...)
	return run(context.Background(), all, &out, &errb), &out, &errb
}

// TestOperatorIdentityIsTrimmedNotReplaced: the operator identity recorded
// is the one given, without the white space around it (--operator or
// $IDEMKIT_OPERATOR alike); an empty $IDEMKIT_OPERATOR is unset (user@host);
// one of white space only is kept as given, so that resolve refuses it as
// naming no one rather than recording user@host in its place. Before, "  "
// in $IDEMKIT_OPERATOR silently fell back to user@host (RED_TEAM 321).
func TestOperatorIdentityIsTrimmedNotReplaced(t *testing.T) {
	fallback, _ := defaultOperator()
	for _, c := range []struct {
		name, flag, env string
		want, from      string
	}{
		{"flag", "ops@acme", "other", "ops@acme", "--operator"},
		{"flag, padded", "  ops@acme\t", "", "ops@acme", "--operator"},
		{"environment", "", "ops@acme", "ops@acme", "$IDEMKIT_OPERATOR"},
		{"environment, padded", "", " ops@acme \n", "ops@acme", "$IDEMKIT_OPERATOR"},
		{"environment, white space only", "", " \t ", " \t ", "$IDEMKIT_OPERATOR"},
		{"environment, empty", "", "", fallback, "user@host (set --operator)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("IDEMKIT_OPERATOR", c.env)
			op, from := operatorIdentity(c.flag)
			if op != c.want || (c.env != "" || c.flag != "") && from != c.from {
				t.Fatalf("operatorIdentity(%q) with $IDEMKIT_OPERATOR %q = %q from %q; want %q from %q", c.flag, c.env, op, from, c.want, c.from)
			}
		})
	}
}
