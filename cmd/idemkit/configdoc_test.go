package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// flagDocs names, per command, the section of the documentation that
// documents its flags: a file under docs/ and the heading of the section
// (which runs to the next "## " heading). docs/CLI.md lists the commands
// and links each to its section.
var flagDocs = map[string]struct{ file, heading string }{
	"dev":             {"CONFIGURATION.md", "## `idemkit dev`"},
	"tables create":   {"CLI.md", "## `idemkit tables create`"},
	"doctor":          {"DEPLOYING.md", "## Check the deployed tables: `idemkit doctor`"},
	"apikey create":   {"CLI.md", "## `idemkit apikey create`"},
	"apikey revoke":   {"CLI.md", "## `idemkit apikey revoke`"},
	"conform":         {"POLICIES.md", "## Checking a policy with `idemkit conform`"},
	"effects list":    {"EFFECTS.md", "## Settling an escaped effect: `idemkit effects`"},
	"effects show":    {"EFFECTS.md", "## Settling an escaped effect: `idemkit effects`"},
	"effects resolve": {"EFFECTS.md", "## Settling an escaped effect: `idemkit effects`"},
	"version":         {"CLI.md", "## `idemkit version`"},

	"webhook secret rotate": {"CLI.md", "## `idemkit webhook secret rotate`"},
	"webhook secret remove": {"CLI.md", "## `idemkit webhook secret remove`"},
}

// commandGroups are the commands that dispatch to commands of their own.
// A group's command may be a group itself ("webhook secret").
var commandGroups = map[string]commandList{"tables": tablesCommands, "apikey": apikeyCommands, "effects": effectsCommands,
	"webhook": webhookCommands, "webhook secret": webhookSecretCommands}

// leafCommands returns the commands path names that run something: path
// itself, or, for a group (commandGroups), its commands' leaves, each
// once, in order ("webhook" -> "webhook secret rotate", "webhook secret
// remove").
func leafCommands(path string) []string {
	g, ok := commandGroups[path]
	if !ok {
		return []string{path}
	}
	var out []string
	seen := map[string]bool{}
	for _, s := range g.entries {
		if !seen[s.name()] {
			seen[s.name()] = true
			out = append(out, leafCommands(path+" "+s.name())...)
		}
	}
	return out
}

// TestDocsNameEveryFlag: every flag of every command (each command of
// `idemkit -h` and of its groups, as `idemkit COMMAND -h` lists its flags)
// is named, as --name, in the section of the documentation that documents
// the command (flagDocs), so no flag is documented only in its --help;
// every command has such a section, and docs/CLI.md links to it.
func TestDocsNameEveryFlag(t *testing.T) {
	var cmds []string
	listed := map[string]bool{}
	for _, e := range commands.entries {
		if listed[e.name()] {
			continue // a group listed one line per command
		}
		listed[e.name()] = true
		cmds = append(cmds, leafCommands(e.name())...)
	}
	cli, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	flagLine := regexp.MustCompile(`(?m)^  --([a-z][a-z0-9-]*)\b`)
	for _, cmd := range cmds {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(strings.Fields(cmd), "-h"), &out, &errb); code != 0 {
			t.Fatalf("idemkit %s -h: exit %d, stderr %q", cmd, code, errb.String())
		}
		if strings.HasPrefix(out.String(), "usage: idemkit "+cmd+" COMMAND") {
			t.Errorf("idemkit %s is a group of commands: add it to commandGroups", cmd)
			continue
		}
		where, ok := flagDocs[cmd]
		if !ok {
			t.Errorf("idemkit %s: no section documents its flags: add one and its row in flagDocs", cmd)
			continue
		}
		if !strings.Contains(string(cli), "("+anchorTo(where.file, where.heading)+")") {
			t.Errorf("docs/CLI.md does not link idemkit %s's section, (%s)", cmd, anchorTo(where.file, where.heading))
		}
		doc, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", where.file))
		if err != nil {
			t.Fatal(err)
		}
		_, section, ok := strings.Cut(string(doc), "\n"+where.heading+"\n")
		if !ok {
			t.Errorf("docs/%s has no section %q (idemkit %s's flags)", where.file, where.heading, cmd)
			continue
		}
		section, _, _ = strings.Cut(section, "\n## ")
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			if !regexp.MustCompile(`(^|[^a-z0-9-])--` + regexp.QuoteMeta(m[1]) + `([^a-z0-9-]|$)`).MatchString(section) {
				t.Errorf("docs/%s, section %q, does not name --%s of idemkit %s", where.file, where.heading, m[1], cmd)
			}
		}
	}
}

// anchorTo is the relative link, from docs/CLI.md, to heading in file, as
// the repository's host renders its anchor ("#" alone within CLI.md).
func anchorTo(file, heading string) string {
	a := strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
	a = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(a, "")
	a = "#" + strings.ReplaceAll(a, " ", "-")
	if file == "CLI.md" {
		return a
	}
	return file + a
}

// TestHelpListsTheCommandsOfCLIMD: `idemkit -h` and docs/CLI.md's table
// list the same commands. A group's line in `idemkit -h` names each of
// its commands ("effects ... (list ..., show, resolve)", "apikey create"
// and "apikey revoke"), so a command added to a group is not left out of
// the top-level help; each row of CLI.md's table names commands that
// dispatch, and every command of the help is a row.
func TestHelpListsTheCommandsOfCLIMD(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("idemkit -h: exit %d, stderr %q", code, errb.String())
	}
	_, list, _ := strings.Cut(out.String(), "\ncommands:\n")
	list, _, _ = strings.Cut(list, "\n\n")
	help := map[string]bool{}
	for _, e := range commands.entries {
		if _, ok := commandGroups[e.name()]; !ok {
			help[e.name()] = true
			continue
		}
		var lines strings.Builder
		for _, l := range strings.Split(list, "\n") {
			if strings.HasPrefix(l, "  "+e.name()+" ") {
				lines.WriteString(l + "\n")
			}
		}
		for _, leaf := range leafCommands(e.name()) {
			help[leaf] = true
			for _, w := range strings.Fields(strings.TrimPrefix(leaf, e.name()+" ")) {
				if !regexp.MustCompile(`\b` + regexp.QuoteMeta(w) + `\b`).MatchString(lines.String()) {
					t.Errorf("idemkit -h does not name idemkit %s; its %s lines:\n%s", leaf, e.name(), lines.String())
				}
			}
		}
	}
	cli, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]bool{}
	row := regexp.MustCompile("(?m)^\\| `idemkit ([a-z ]+)`((?:, `[a-z]+`)*) \\|")
	for _, m := range row.FindAllStringSubmatch(string(cli), -1) {
		doc[m[1]] = true
		group := strings.Fields(m[1])[0]
		for _, s := range regexp.MustCompile("`([a-z]+)`").FindAllStringSubmatch(m[2], -1) {
			doc[group+" "+s[1]] = true
		}
	}
	if len(doc) == 0 {
		t.Fatal("docs/CLI.md: no command table found")
	}
	for c := range help {
		if !doc[c] {
			t.Errorf("idemkit %s is a command of idemkit -h, but no row of docs/CLI.md's table names it", c)
		}
	}
	for c := range doc {
		if !help[c] {
			t.Errorf("docs/CLI.md's table names idemkit %s, which idemkit -h does not list", c)
		}
	}
}
