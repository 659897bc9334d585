package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/shared"
)

// TestUsageErrorsFollowOneRule: every command's usage error (a missing or
// invalid flag or argument) exits 2 before anything is reached, prints
// nothing on stdout and exactly two lines on stderr: one naming the flag
// or argument, then "run 'idemkit COMMAND -h' for help". A missing table,
// with neither --table, its variable nor --endpoint, is a missing flag
// for every command that reaches a table.
func TestUsageErrorsFollowOneRule(t *testing.T) {
	for _, env := range []string{settings.EnvAPIKeysTable, settings.EnvEffectsTable, settings.EnvFenceTable,
		settings.EnvRunsTable, idemenv.Table, settings.EnvDynamoDBEndpoint} {
		t.Setenv(env, "")
	}
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	const eff = "acme/e1-0123456789abcdef"
	notATemplate := filepath.Join(t.TempDir(), "t.yaml")
	if err := os.WriteFile(notATemplate, []byte("- a list, not a template\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		names string // what the first line must name
	}{
		{[]string{"tables", "create"}, "--endpoint"},
		{[]string{"tables", "create", "--endpoint", ep, "extra"}, `"extra"`},
		{[]string{"tables", "create", "--endpoint", ep, "--only", "ledger"}, "-only"},
		{[]string{"tables", "create", "--endpoint", "ftp://x"}, "-endpoint"},
		{[]string{"tables", "create", "--endpoint", ep, "--prefix", "bad prefix!"}, "--prefix"},
		{[]string{"doctor"}, "--endpoint"},
		{[]string{"doctor", "--only", "runs"}, "--endpoint"}, // with EFFECTS_TABLE set below: no table --only keeps is named
		{[]string{"doctor", "--endpoint", ep, "extra"}, `"extra"`},
		{[]string{"doctor", "--table", "Bogus=x", "--endpoint", ep}, "-table"},
		{[]string{"doctor", "--endpoint", ep, "--prefix", "bad prefix!"}, "--prefix"},
		{[]string{"doctor", "--endpoint", ep, "--template", filepath.Join(t.TempDir(), "none.yaml")}, "--template"},
		{[]string{"doctor", "--endpoint", ep, "--template", notATemplate}, "--template"},
		{[]string{"doctor", "--endpoint", ep, "--template", filepath.Join(shared.ModuleRoot(), "docs", "idempotency-table.yaml"), "--only", "effects"}, "--only"},
		{[]string{"apikey", "create"}, "--tenant"},
		{[]string{"apikey", "create", "--tenant", "a b", "--endpoint", ep}, "--tenant"},
		{[]string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "extra"}, `"extra"`},
		{[]string{"apikey", "create", "--tenant", "acme"}, "--table"},
		{[]string{"apikey", "create", "--nope"}, "-nope"},
		{[]string{"effects", "list"}, "--table"},
		{[]string{"effects", "list", "--endpoint", ep, "extra"}, `"extra"`},
		{[]string{"effects", "list", "--endpoint", ep, "--state", "gone"}, "--state"},
		{[]string{"effects", "list", "--endpoint", ep, "--limit", "-3"}, "--limit"},
		{[]string{"effects", "list", "--limit", "many"}, "-limit"},
		{[]string{"effects", "list", "--endpoint", ep, "--run", "acme/short"}, "--run"},
		{[]string{"effects", "show", "acme/short", "--endpoint", ep}, `EFFECT "acme/short"`},
		{[]string{"effects", "resolve", "no-tenant-part-0123456789", "--as", "delivered", "--endpoint", ep}, `EFFECT "no-tenant-part-0123456789"`},
		{[]string{"effects", "show", eff}, "--table"},
		{[]string{"effects", "show", "--endpoint", ep}, "EFFECT"},
		{[]string{"effects", "show", "a", "b", "--endpoint", ep}, "EFFECT"},
		{[]string{"effects", "resolve", eff, "--as", "delivered", "--rev", "r1"}, "--table"},
		{[]string{"effects", "resolve", eff, "--as", "delivered"}, "--table"},
		{[]string{"effects", "resolve", eff, "--as", "delivered", "--endpoint", ep}, "--rev"}, // no show remembered, no --rev
		{[]string{"effects", "resolve", eff, "--endpoint", ep}, "--as"},
		{[]string{"effects", "resolve", eff, "--as", "maybe", "--endpoint", ep}, "--as"},
		{[]string{"effects", "resolve", "--as", "delivered", "--endpoint", ep}, "EFFECT"},
		{[]string{"effects", "resolve", eff, "--as", "delivered", "--rev", "r1", "--endpoint", ep, "--note", strings.Repeat("n", 513)}, "--note"},
		{[]string{"effects", "resolve", eff, "--as", "delivered", "--rev", "r1", "--endpoint", ep, "--operator", "a\tb"}, "--operator"},
		{[]string{"version", "extra"}, `"extra"`},
		{[]string{"version", "--nope"}, "-nope"},
		{[]string{"dev", "extra"}, `"extra"`},
		{[]string{"dev", "--emulator", "cassandra"}, "--emulator"},
		{[]string{"dev", "--emulator", "moto", "--dynamodb-endpoint", ep}, "--emulator"},
		{[]string{"dev", "--idempotency-wait", "-1s", "--dynamodb-endpoint", ep}, "--idempotency-wait"},
		{[]string{"dev", "--authorizer-ttl", "-1s", "--dynamodb-endpoint", ep}, "--authorizer-ttl"},
		{[]string{"dev", "--request-timeout", "0s", "--dynamodb-endpoint", ep}, "--request-timeout"},
		{[]string{"dev", "--addr", "127.0.0.1:99999", "--dynamodb-endpoint", ep}, "--addr"},
		{[]string{"dev", "--addr", "127.0.0.1:abc", "--dynamodb-endpoint", ep}, "--addr"},
		{[]string{"dev", "--addr", "127.0.0.1:-1", "--dynamodb-endpoint", ep}, "--addr"},
		// A setting a flag gave, refused with the environment's: the flag
		// is named on the setting's line.
		{[]string{"dev", "--policy", "strict"}, "--policy sets IDEMPOTENCY_POLICY"},
		{[]string{"conform", "--api-key", "k"}, "URL"},
		{[]string{"conform", "--api-key", "k", ""}, `URL "": want an http:// or https:// URL`},
		{[]string{"conform", "--api-key", "k", "notaurl"}, `URL "notaurl": want an http:// or https:// URL`},
		{[]string{"conform", "--api-key", "k", "http://"}, `URL "http://": want an http:// or https:// URL`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		// A flag whose value went missing (an unset shell variable):
		// the next flag is not taken as its value.
		{[]string{"conform", "--api-key", "--api-key", "k2"}, `--api-key needs a value: the argument after it, "--api-key", is a flag`},
		{[]string{"effects", "list", "--endpoint", "--table", "T1x"}, `--endpoint needs a value: the argument after it, "--table", is a flag`},
		{[]string{"apikey", "create", "--tenant", "--endpoint=" + ep}, `--tenant needs a value: the argument after it, "--endpoint=` + ep + `", is a flag`},
		// A region no endpoint can be named for, which the SDK refused at
		// run time ("failed to bind endpoint params").
		{[]string{"tables", "create", "--endpoint", ep, "--region", "us east"}, `--region "us east"`},
		{[]string{"doctor", "--endpoint", ep, "--region", " "}, `--region " "`},
		{[]string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--region", "eu_west_1"}, `--region "eu_west_1"`},
		{[]string{"apikey", "revoke", "--hash", strings.Repeat("0", 64), "--endpoint", ep, "--region", "-eu"}, `--region "-eu"`},
		{[]string{"effects", "list", "--endpoint", ep, "--region", "eu/west"}, `--region "eu/west"`},
		{[]string{"effects", "resolve", eff, "--as", "delivered", "--rev", "r1", "--endpoint", ep, "--fence-table", "F1x", "--fence-region", "x y"}, `--fence-region "x y"`},
		{[]string{"conform", "http://127.0.0.1:9"}, "--api-key"},
	} {
		if strings.Join(c.args, " ") == "doctor --only runs" {
			t.Setenv(settings.EnvEffectsTable, "orders-effects")
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		t.Setenv(settings.EnvEffectsTable, "")
		cmd := c.args[0]
		if cmd == "tables" || cmd == "apikey" || cmd == "effects" {
			cmd += " " + c.args[1]
		}
		hint := "run 'idemkit " + cmd + " -h' for help"
		if cmd == "bogus" { // no command: idemkit's own hint
			hint = "run 'idemkit -h' for help"
		}
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.Contains(lines[0], c.names) || lines[1] != hint {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q; want exit 2, nothing on stdout, one line naming %s, then %q",
				c.args, code, out.String(), errb.String(), c.names, hint)
		}
	}
}

// TestExitStatusRuleIsStated: the rule every command follows (0 success,
// 1 a failure at run time, 2 a usage error with its one line and the hint)
// is stated in `idemkit -h` and in docs/CLI.md, the page that documents
// the CLI.
func TestExitStatusRuleIsStated(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("idemkit -h: exit %d", code)
	}
	doc, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "CLI.md"))
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"idemkit -h": out.String(), "docs/CLI.md": string(doc)} {
		flat := strings.Join(strings.Fields(text), " ")
		for _, s := range []string{"0 success", "1 a failure at run time", "2 a usage error", "run 'idemkit COMMAND -h' for help"} {
			if !strings.Contains(flat, s) {
				t.Errorf("%s does not state the exit status rule: lacks %q", where, s)
			}
		}
	}
}

// TestFlagValueErrorsSayWhatIsAccepted: a value the flag's type cannot
// take (a duration without its unit, a word for a number, a number not
// written in decimal digits alone: +5, 010, 0x10, 1_000) is a usage error
// whose one line says what the flag accepts, not only "parse error".
// Before, --limit took +5 as 5, 010 as 8 and 0x10 as 16.
func TestFlagValueErrorsSayWhatIsAccepted(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--authorizer-ttl", "1"}, "want a duration with its unit"},
		{[]string{"dev", "--request-timeout", "soon"}, "want a duration with its unit"},
		{[]string{"effects", "list", "--limit", "many"}, "want a whole number"},
		// In decimal digits but past the largest int: out of range, not
		// "want a whole number" (RED_TEAM 432).
		{[]string{"effects", "list", "--limit", "99999999999999999999"}, "out of range; the largest accepted is 9223372036854775807"},
		// Written as a port is (--addr): decimal digits alone, so that
		// 010 is never 8, nor 0x10 16 (the flag package's base prefixes).
		{[]string{"effects", "list", "--limit", "+5"}, "want a whole number in decimal digits"},
		{[]string{"effects", "list", "--limit", "010"}, "want a whole number in decimal digits"},
		{[]string{"effects", "list", "--limit", "0x10"}, "want a whole number in decimal digits"},
		{[]string{"effects", "list", "--limit", "1_000"}, "want a whole number in decimal digits"},
		{[]string{"effects", "list", "--limit", " 5"}, "want a whole number in decimal digits"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || len(lines) != 2 || !strings.Contains(lines[0], c.want) || !strings.Contains(lines[0], c.args[len(c.args)-2][1:]) {
			t.Errorf("idemkit %q: exit %d stderr %q; want exit 2 and one line naming the flag and saying %q", c.args, code, errb.String(), c.want)
		}
	}
}

// TestConformInterruptedSaysSo: Ctrl-C during `idemkit conform` fails no
// scenario: exit 1 (the check did not finish), the scenarios that ran
// listed, and one line saying how many did not run.
func TestConformInterruptedSaysSo(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/.well-known/openwop") {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		cancel() // Ctrl-C while the first scenario waits for its answer
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	var out, errb bytes.Buffer
	code := run(ctx, []string{"conform", "--api-key", "a", "--api-key", "b", srv.URL}, &out, &errb)
	if code != 1 || strings.Contains(out.String(), "FAIL") || !strings.Contains(errb.String(), "interrupted: 7 of 7 scenarios not run") {
		t.Fatalf("exit %d stdout %q stderr %q; want exit 1, no FAIL, and the scenarios not run counted", code, out.String(), errb.String())
	}
}
