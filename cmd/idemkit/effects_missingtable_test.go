package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestEffectsCommandsSayTheEffectsTableIsWrongInTheirOwnWords: an effects
// table that does not exist where the flags point, or a table of another
// key schema (the idempotency table named by mistake), is said as the
// apikey and webhook commands say a missing table: the table, where it was
// looked for, and what to do, never the library's error chain ("ledger:
// effects store misconfigured: ... dynamostore: Scan: ..."), on each
// effects command that reads the table by key or scans it, on the three
// engines (RED_TEAM 359).
func TestEffectsCommandsSayTheEffectsTableIsWrongInTheirOwnWords(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
		t.Setenv("IDEMKIT_OPERATOR", "ops@acme")
		const effect = "acme/3q9Xv0d2mJm8L1hZ1H3vO3n8cZkqv4pVwzXyq2Wc0bE"
		commands := map[string][]string{
			"list":          {"effects", "list"},
			"list --run":    {"effects", "list", "--run", "acme/run-0123456789abcdef"},
			"show":          {"effects", "show", effect},
			"resolve --rev": {"effects", "resolve", effect, "--as", "delivered", "--rev", "AAAAAAAAAAAA"},
		}
		other := e.CreateTable(t, "IdempotencyTable")
		for _, c := range []struct {
			table string
			want  []string
			only  map[string]bool // nil: every command
		}{
			{"NoSuchEffectsTable", []string{`table "NoSuchEffectsTable" does not exist at ` + e.Endpoint, "--table (or $EFFECTS_TABLE)", "idemkit tables create --only effects"}, nil},
			// A scan reads any table, and a query of another table names
			// the index it lacks in DynamoDB's own words; a read by key is
			// refused for the key schema.
			{other, []string{`table "` + other + `" at ` + e.Endpoint + ` is not an effects table`, "--table (or $EFFECTS_TABLE)", "idemkit doctor"}, map[string]bool{"show": true, "resolve --rev": true}},
		} {
			for name, args := range commands {
				if c.only != nil && !c.only[name] {
					continue
				}
				var out, errb bytes.Buffer
				code := run(context.Background(), append(append([]string{}, args...), "--endpoint", e.Endpoint, "--table", c.table), &out, &errb)
				msg := errb.String()
				if code != 1 {
					t.Errorf("%s on %s: exit %d, want 1: %s", name, c.table, code, msg)
				}
				for _, w := range c.want {
					if !strings.Contains(msg, w) {
						t.Errorf("%s on %s: %q does not say %q", name, c.table, msg, w)
					}
				}
				for _, label := range []string{"ledger:", "dynamostore:", "misconfigured", "Exception"} {
					if strings.Contains(msg, label) {
						t.Errorf("%s on %s: %q carries the library's %q", name, c.table, msg, label)
					}
				}
			}
		}
	})
}
