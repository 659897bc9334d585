package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flagLine is a flag's first line in a command's -h: "  --name" and, for a
// flag that takes a value, the value's name.
var flagLine = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)( \S+)?$`)

// TestEmptyFlagValueIsUsageError: a flag given an empty value
// (`--region ""`, `--note=`) is a usage error naming the flag, exit 2,
// before anything is reached, never silently the flag's default. Every
// flag of every command is tried, as its -h lists them; the table
// prefixes are the exception: an empty prefix names each table by its
// logical ID alone, which is not the default.
func TestEmptyFlagValueIsUsageError(t *testing.T) {
	emptyAllowed := map[string]bool{"prefix": true, "table-prefix": true}
	for _, cmd := range [][]string{
		{"dev"}, {"tables", "create"}, {"doctor"}, {"apikey", "create"}, {"apikey", "revoke"},
		{"conform"}, {"effects", "list"}, {"effects", "show"}, {"effects", "resolve"},
	} {
		var help, herr bytes.Buffer
		if code := run(context.Background(), append(append([]string{}, cmd...), "-h"), &help, &herr); code != 0 {
			t.Fatalf("%v -h: exit %d", cmd, code)
		}
		flags := flagLine.FindAllStringSubmatch(help.String(), -1)
		if len(flags) == 0 {
			t.Fatalf("%v -h lists no flags:\n%s", cmd, help.String())
		}
		for _, f := range flags {
			name := f[1]
			if emptyAllowed[name] {
				continue
			}
			forms := [][]string{{"--" + name + "="}}
			if f[2] != "" { // a flag that takes a value: also as the next argument
				forms = append(forms, []string{"--" + name, ""})
			}
			for _, form := range forms {
				args := append(append([]string{}, cmd...), form...)
				switch {
				case cmd[0] == "conform":
					args = append(args, "http://127.0.0.1:1")
				case cmd[0] == "effects" && cmd[1] != "list":
					args = append(args, "acme/e1")
				}
				switch {
				case name == "endpoint" || name == "dynamodb-endpoint" || cmd[0] == "conform":
				case cmd[0] == "dev":
					args = append(args, "--dynamodb-endpoint", "http://127.0.0.1:1")
				default:
					args = append(args, "--endpoint", "http://127.0.0.1:1")
				}
				var out, errb bytes.Buffer
				// Bounded: before the fix some of these ran (dev served).
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				code := run(ctx, args, &out, &errb)
				cancel()
				lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
				want := "idemkit " + strings.Join(cmd, " ") + ": empty value for --" + name
				if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], want) {
					t.Errorf("idemkit %q: exit %d stdout %q stderr %q, want exit 2 and %q...", args, code, out.String(), errb.String(), want)
				}
			}
		}
	}
}
