package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestHelpEveryCommand: every command and subcommand answers --help and -h
// with its usage on stdout (a usage line, a description, at least one
// example, its flags under a "flags:" heading, which a command without
// flags does not print) and exit 0; the usage line names every flag the
// command defines.
func TestHelpEveryCommand(t *testing.T) {
	flagLine := regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)\b`)
	for _, c := range []struct {
		cmd   []string
		flags []string // the flags the command must define (and its usage line name)
	}{
		{nil, nil},
		{[]string{"dev"}, []string{"addr", "emulator", "dynamodb-endpoint", "table-prefix", "api-key", "request-timeout", "idempotency-wait", "authorizer-ttl", "allow-loopback-webhooks", "policy", "conformance-seams"}},
		{[]string{"tables"}, nil},
		{[]string{"tables", "create"}, []string{"endpoint", "only", "prefix", "region"}},
		{[]string{"doctor"}, []string{"endpoint", "table", "only", "prefix", "region", "template", "parameter"}},
		{[]string{"apikey"}, nil},
		{[]string{"apikey", "create"}, []string{"tenant", "attr", "key", "endpoint", "table", "region"}},
		{[]string{"conform"}, []string{"api-key", "route", "body", "profile", "scope-key", "other-route", "fail-body", "failed-run-body", "retry-route", "test-route", "test-body", "mode-header",
			"slow-body", "invalid-body", "get", "timeout", "stagger"}},
		{[]string{"effects"}, nil},
		{[]string{"effects", "list"}, []string{"state", "run", "limit", "endpoint", "table", "region", "json"}},
		{[]string{"effects", "show"}, []string{"endpoint", "table", "region", "json"}},
		{[]string{"effects", "resolve"}, []string{"as", "note", "operator", "rev", "fence-table", "fence-region", "endpoint", "table", "region", "json"}},
		{[]string{"version"}, nil},
	} {
		for _, h := range []string{"--help", "-h"} {
			name := strings.TrimSpace("idemkit " + strings.Join(c.cmd, " ") + " " + h)
			t.Run(name, func(t *testing.T) {
				var out, errb bytes.Buffer
				code := run(context.Background(), append(append([]string{}, c.cmd...), h), &out, &errb)
				help := out.String()
				if code != 0 || errb.Len() != 0 {
					t.Fatalf("exit %d, stderr %q", code, errb.String())
				}
				if !strings.HasPrefix(help, "usage: idemkit") || !strings.Contains(help, "example") {
					t.Fatalf("no usage line or example:\n%s", help)
				}
				// The usage line runs until the first blank line.
				usage, body, _ := strings.Cut(help, "\n\n")
				if len(strings.TrimSpace(body)) < 40 {
					t.Fatalf("no description:\n%s", help)
				}
				defined := map[string]bool{}
				for _, m := range flagLine.FindAllStringSubmatch(help, -1) {
					defined[m[1]] = true
				}
				for _, f := range c.flags {
					if !defined[f] {
						t.Errorf("flag --%s missing from the flag list:\n%s", f, help)
					}
				}
				if len(defined) != len(c.flags) {
					t.Errorf("flags listed %v, want %v", defined, c.flags)
				}
				if hasHeading := regexp.MustCompile(`(?m)^flags:$`).MatchString(help); hasHeading != (len(c.flags) > 0) {
					t.Errorf("a \"flags:\" heading: %v, want it exactly when the command has flags (%d):\n%s", hasHeading, len(c.flags), help)
				}
				for f := range defined {
					if !regexp.MustCompile(`\[?--` + regexp.QuoteMeta(f) + `\b`).MatchString(usage) {
						t.Errorf("usage line lacks --%s:\n%s", f, usage)
					}
				}
			})
		}
	}
}

// TestSubcommandUsageErrors: a command group without (or with an unknown)
// subcommand prints its usage, the list of its commands, on stderr and
// exits 2. (A command's own usage errors are one line and the hint:
// TestUsageErrorsFollowOneRule.)
func TestSubcommandUsageErrors(t *testing.T) {
	// Without a command, idemkit and each group print their list of
	// commands on stderr (exit 2).
	for _, args := range [][]string{nil, {"tables"}, {"apikey"}, {"effects"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "usage: idemkit") {
			t.Errorf("idemkit %v: exit %d stdout %q stderr %q", args, code, out.String(), errb.String())
		}
	}
	// An unknown command is a usage error as docs/CLI.md states the rule:
	// two lines on stderr, the first naming it and the commands the group
	// has, the second the hint; nothing on stdout.
	for _, c := range []struct {
		args       []string
		prog, want string
	}{
		{[]string{"bogus"}, "idemkit", "dev, tables, doctor, apikey, webhook, conform, effects or version"},
		{[]string{"help", "bogus"}, "idemkit", "dev, tables, doctor, apikey, webhook, conform, effects or version"},
		{[]string{"--endpoint", "http://127.0.0.1:8000"}, "idemkit", "dev, tables, doctor, apikey, webhook, conform, effects or version"},
		{[]string{"tables", "drop"}, "idemkit tables", "create"},
		{[]string{"apikey", "drop"}, "idemkit apikey", "create or revoke"},
		{[]string{"effects", "drop"}, "idemkit effects", "list, show or resolve"},
		{[]string{"help", "effects", "drop"}, "idemkit effects", "list, show or resolve"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		unknown := c.args[len(c.args)-1]
		if c.args[0] == "--endpoint" {
			unknown = c.args[0]
		}
		want := fmt.Sprintf("%s: unknown command %q: want %s", c.prog, unknown, c.want)
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], want) || lines[1] != "run '"+c.prog+" -h' for help" {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q; want 2, %q, then the hint", c.args, code, out.String(), errb.String(), want)
		}
	}
}

// TestHelpNamesFlagsAsTheDocsDo: every command's -h lists its flags as
// docs/CLI.md and the usage lines write them, with two dashes
// ("--endpoint URL"), never the flag package's one ("-endpoint URL").
func TestHelpNamesFlagsAsTheDocsDo(t *testing.T) {
	single := regexp.MustCompile(`(?m)^  -[a-z]`)
	double := regexp.MustCompile(`(?m)^  --[a-z]`)
	for _, cmd := range [][]string{
		{"dev"}, {"tables", "create"}, {"doctor"}, {"apikey", "create"}, {"apikey", "revoke"},
		{"conform"}, {"effects", "list"}, {"effects", "show"}, {"effects", "resolve"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(append([]string{}, cmd...), "-h"), &out, &errb); code != 0 {
			t.Fatalf("%v -h: exit %d", cmd, code)
		}
		if m := single.FindString(out.String()); m != "" || !double.MatchString(out.String()) {
			t.Errorf("idemkit %v -h lists a flag with one dash (%q), or none with two:\n%s", cmd, m, out.String())
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errb); code != 0 ||
		!regexp.MustCompile(`^idemkit \S+ commit \S+`).MatchString(out.String()) {
		t.Fatalf("exit %d: %q %q", code, out.String(), errb.String())
	}
	// The flag spelling users try first is the command.
	for _, flag := range []string{"--version", "-version"} {
		var fout, ferr bytes.Buffer
		if code := run(context.Background(), []string{flag}, &fout, &ferr); code != 0 || fout.String() != out.String() || ferr.Len() != 0 {
			t.Errorf("idemkit %s: exit %d stdout %q stderr %q; want exit 0 and %q", flag, code, fout.String(), ferr.String(), out.String())
		}
	}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{nil, "idemkit (devel) commit unknown"},
		{&debug.BuildInfo{Main: debug.Module{Path: "github.com/idemkit/idemkit", Version: "(devel)"}}, "idemkit (devel) commit unknown"},
		{&debug.BuildInfo{Main: debug.Module{Version: ""}}, "idemkit (devel) commit unknown"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.4.1"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "db51217aa0"}, {Key: "vcs.time", Value: "2026-12-01T07:00:00Z"}, {Key: "vcs.modified", Value: "false"},
		}}, "idemkit v0.4.1 commit db51217aa0 (2026-12-01T07:00:00Z)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "db51217aa0"}, {Key: "vcs.modified", Value: "true"},
		}}, "idemkit (devel) commit db51217aa0+dirty"},
	} {
		if got := versionLine(c.bi); got != c.want {
			t.Errorf("versionLine(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
}

// TestConformRequiresAPIKey: without --api-key, conform is a usage error
// (exit 2, a message naming the flag) and sends no request.
func TestConformRequiresAPIKey(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"conform", "http://127.0.0.1:9"}, &out, &errb)
	if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "idemkit conform: --api-key KEY is required") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
}

// TestUsageIsDerivedFromTheCommandList: each command list (idemkit's and
// every group's) is the one place its commands are written: its usage
// lists every entry with its summary, and each entry's name dispatches to
// it; a command added to a list is listed and dispatched with no other
// edit.
func TestUsageIsDerivedFromTheCommandList(t *testing.T) {
	for _, l := range []commandList{commands, tablesCommands, apikeyCommands, effectsCommands, webhookCommands, webhookSecretCommands} {
		u := l.usage()
		for _, e := range l.entries {
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(e.line) + ` +` + regexp.QuoteMeta(e.summary) + `$`).MatchString(u) {
				t.Errorf("%s usage does not list %q - %q:\n%s", l.prog(), e.line, e.summary, u)
			}
			var out, errb bytes.Buffer
			if code := l.dispatch(context.Background(), []string{e.name(), "-h"}, &out, &errb); code != 0 ||
				!strings.HasPrefix(out.String(), "usage: "+l.prog()+" "+e.name()) {
				t.Errorf("%s %s -h: exit %d, %q", l.prog(), e.name(), code, out.String())
			}
		}
	}
	called := false
	l := commands
	l.entries = append(append([]entry{}, commands.entries...), entry{"frobnicate THING", "a new command", func(context.Context, []string, io.Writer, io.Writer) int {
		called = true
		return 0
	}})
	if !regexp.MustCompile(`(?m)^  frobnicate THING +a new command$`).MatchString(l.usage()) {
		t.Fatalf("a new entry is not listed:\n%s", l.usage())
	}
	if code := l.dispatch(context.Background(), []string{"frobnicate"}, io.Discard, io.Discard); code != 0 || !called {
		t.Fatalf("a new entry is not dispatched: exit %d, called %v", code, called)
	}
}

// TestOneArgumentCommandsSayWhatIsMissing: a command that takes exactly one
// argument, given none or two, says so on its first line of stderr (then
// the hint naming -h) and exits 2, as the other commands' usage errors do.
func TestOneArgumentCommandsSayWhatIsMissing(t *testing.T) {
	for _, args := range [][]string{{"effects", "show"}, {"effects", "show", "a", "b"}, {"effects", "resolve", "--as", "delivered"}, {"effects", "resolve", "a", "b", "--as", "delivered"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		first, _, _ := strings.Cut(errb.String(), "\n")
		want := "idemkit " + args[0] + " " + args[1] + ": want exactly one EFFECT"
		if code != 2 || out.Len() != 0 || !strings.HasPrefix(first, want) || !strings.HasSuffix(errb.String(), "\nrun 'idemkit "+args[0]+" "+args[1]+" -h' for help\n") {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q, want exit 2 and a first line starting %q, then the hint", args, code, out.String(), errb.String(), want)
		}
	}
}
