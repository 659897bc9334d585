package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem/idemenv"
)

// The table a command reaches: --table, else its environment variable, else
// (with --endpoint) the local default name; with an endpoint, the client
// carries --region.
func TestTableTarget(t *testing.T) {
	ctx := context.Background()
	t.Setenv(settings.EnvEffectsTable, "")
	for _, c := range []struct{ table, env, want string }{
		{"flag-table", "env-table", "flag-table"},
		{"", "env-table", "env-table"},
		{"", "", DefaultTablePrefix + "EffectsTable"},
	} {
		t.Setenv(settings.EnvEffectsTable, c.env)
		client, table, err := tableTarget(ctx, "http://127.0.0.1:1", c.table, "eu-west-1", "--table", settings.EnvEffectsTable, "EffectsTable")
		if err != nil || table != c.want || client.Options().Region != "eu-west-1" {
			t.Errorf("tableTarget(--table %q, $%s %q) = %q, %v (region %q); want %q", c.table, settings.EnvEffectsTable, c.env, table, err, client.Options().Region, c.want)
		}
	}
	t.Setenv(settings.EnvEffectsTable, "")
	if _, _, err := tableTarget(ctx, "", "", "", "--table", settings.EnvEffectsTable, "EffectsTable"); !errors.As(err, new(noTableError)) {
		t.Errorf("no endpoint, no table: %v, want a noTableError", err)
	}
}

// Without --endpoint and without a table, apikey create and the effects
// commands alike are a usage error (exit 2): the line names --table and the
// environment variable, then the hint naming -h.
func TestNoTableWithoutEndpoint(t *testing.T) {
	t.Setenv(settings.EnvAPIKeysTable, "")
	t.Setenv(settings.EnvEffectsTable, "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"apikey", "create", "--tenant", "acme"}, 2, "idemkit apikey create: --table (or $" + settings.EnvAPIKeysTable + ") is required without --endpoint\n" +
			"run 'idemkit apikey create -h' for help\n"},
		{[]string{"effects", "list"}, 2, "idemkit effects list: --table (or $" + settings.EnvEffectsTable + ") is required without --endpoint\n" +
			"run 'idemkit effects list -h' for help\n"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), c.args, &out, &errb); code != c.code || out.Len() != 0 || errb.String() != c.want {
			t.Errorf("idemkit %v: exit %d stdout %q stderr %q; want exit %d stderr %q", c.args, code, out.String(), errb.String(), c.code, c.want)
		}
	}
}

// TestMalformedTableNameIsAUsageError: a table name DynamoDB would refuse
// (3..255 of letters, digits, '_', '-' and '.') is a usage error of every
// command that takes one, before anything is reached: exit 2, nothing on
// stdout, one line naming the flag (or the variable that gave the name)
// and what it accepts, then the hint. Before, the command went to
// DynamoDB and failed there (exit 1).
func TestMalformedTableNameIsAUsageError(t *testing.T) {
	for _, env := range []string{settings.EnvAPIKeysTable, settings.EnvEffectsTable, settings.EnvFenceTable, settings.EnvFenceTableRegion,
		settings.EnvRunsTable, idemenv.Table, settings.EnvDynamoDBEndpoint} {
		t.Setenv(env, "")
	}
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	const eff = "acme/e1-0123456789abcdef"
	const rule = "3..255 of letters, digits, '_', '-' and '.'"
	long := strings.Repeat("t", 256)
	for _, c := range []struct {
		env, val string // a variable to set for this case
		args     []string
		names    string
	}{
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "bad name!"}, `--table "bad name!"`},
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "ab"}, `--table "ab"`},
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--table", long}, `--table "tttt`},
		{settings.EnvAPIKeysTable, "keys/table", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep}, "$" + settings.EnvAPIKeysTable + ` "keys/table"`},
		{"", "", []string{"apikey", "revoke", "--key", "idk_0123456789abcdef", "--endpoint", ep, "--table", "bad name!"}, `--table "bad name!"`},
		{settings.EnvAPIKeysTable, "keys/table", []string{"apikey", "revoke", "--hash", strings.Repeat("0a", 32), "--endpoint", ep}, "$" + settings.EnvAPIKeysTable + ` "keys/table"`},
		{"", "", []string{"effects", "list", "--endpoint", ep, "--table", "x:y"}, `--table "x:y"`},
		{settings.EnvEffectsTable, "a b", []string{"effects", "list", "--endpoint", ep}, "$" + settings.EnvEffectsTable + ` "a b"`},
		{"", "", []string{"effects", "show", eff, "--endpoint", ep, "--table", "é-table"}, `--table "é-table"`},
		{"", "", []string{"effects", "resolve", eff, "--as", "delivered", "--rev", "r1", "--endpoint", ep, "--table", "t"}, `--table "t"`},
		{"", "", []string{"effects", "resolve", eff, "--as", "not-delivered", "--rev", "r1", "--endpoint", ep, "--fence-table", "fence table"}, `--fence-table "fence table"`},
		{settings.EnvFenceTable, "fence#1", []string{"effects", "resolve", eff, "--as", "not-delivered", "--rev", "r1", "--endpoint", ep}, "$" + settings.EnvFenceTable + ` "fence#1"`},
		{"", "", []string{"doctor", "--endpoint", ep, "--table", "effects=bad name"}, "-table"},
		{settings.EnvRunsTable, "runs table", []string{"doctor", "--endpoint", ep}, "$" + settings.EnvRunsTable + ` "runs table"`},
	} {
		if c.env != "" {
			t.Setenv(c.env, c.val)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if c.env != "" {
			t.Setenv(c.env, "")
		}
		cmd := c.args[0]
		if cmd == "apikey" || cmd == "effects" {
			cmd += " " + c.args[1]
		}
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.Contains(lines[0], c.names) || !strings.Contains(lines[0], rule) ||
			lines[1] != "run 'idemkit "+cmd+" -h' for help" {
			t.Errorf("idemkit %q (%s=%q): exit %d stdout %q stderr %q; want exit 2, one line naming %s and saying %q, then the hint",
				c.args, c.env, c.val, code, out.String(), errb.String(), c.names, rule)
		}
	}
}

// A table's ARN is a TableName DynamoDB accepts (arn:PARTITION:dynamodb:
// REGION:ACCOUNT:table/NAME): every command that takes a table passes it
// on rather than refusing it as a usage error; an ARN that is malformed,
// or names no table, is still one.
func TestTableARNIsATableName(t *testing.T) {
	for _, env := range []string{settings.EnvAPIKeysTable, settings.EnvEffectsTable, settings.EnvFenceTable, settings.EnvFenceTableRegion,
		settings.EnvRunsTable, idemenv.Table, settings.EnvDynamoDBEndpoint} {
		t.Setenv(env, "")
	}
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	const ep = "http://127.0.0.1:1" // nothing listens: an accepted name fails at the engine, exit 1
	const eff = "acme/e1-0123456789abcdef"
	const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/prod-ApiKeysTable"
	for _, c := range []struct {
		env, val string
		args     []string
		want     int
	}{
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", arn}, 1},
		{"", "", []string{"apikey", "revoke", "--key", "k-0123456789", "--endpoint", ep, "--table", "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/keys.v2"}, 1},
		{settings.EnvAPIKeysTable, arn, []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep}, 1},
		{settings.EnvEffectsTable, "arn:aws-us-gov:dynamodb:us-gov-west-1:123456789012:table/orders_effects", []string{"effects", "list", "--endpoint", ep}, 1},
		{"", "", []string{"effects", "resolve", eff, "--as", "not-delivered", "--rev", "r1", "--endpoint", ep, "--fence-table", "arn:aws:dynamodb:us-east-1:123456789012:table/fence"}, 1},
		// Malformed: no table, a bad name, a short account, another service.
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "arn:aws:dynamodb:eu-west-1:123456789012:table/"}, 2},
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "arn:aws:dynamodb:eu-west-1:123456789012:table/a b"}, 2},
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "arn:aws:dynamodb:eu-west-1:1234:table/keys"}, 2},
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "arn:aws:s3:eu-west-1:123456789012:table/keys"}, 2},
		{"", "", []string{"apikey", "create", "--tenant", "acme", "--endpoint", ep, "--table", "arn:aws:dynamodb:eu-west-1:123456789012:table/keys/index/byRun"}, 2},
	} {
		if c.env != "" {
			t.Setenv(c.env, c.val)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if c.env != "" {
			t.Setenv(c.env, "")
		}
		if code != c.want || (c.want == 1 && strings.Contains(errb.String(), "want a DynamoDB table name")) {
			t.Errorf("idemkit %q (%s=%q): exit %d stderr %q; want exit %d", c.args, c.env, c.val, code, errb.String(), c.want)
		}
		if c.want == 2 && !strings.Contains(errb.String(), "or a table's ARN") {
			t.Errorf("idemkit %q: stderr %q does not say an ARN is accepted", c.args, errb.String())
		}
	}
	// doctor: --table LogicalID=ARN and a variable holding an ARN are checked, not refused.
	t.Setenv(settings.EnvRunsTable, "arn:aws:dynamodb:us-east-1:123456789012:table/runs")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--endpoint", ep, "--only", "runs,fence", "--table", "fence=arn:aws:dynamodb:us-east-1:123456789012:table/fence"}, &out, &errb)
	if code == 2 {
		t.Errorf("doctor with table ARNs: exit 2, stderr %q; want them checked", errb.String())
	}
}
