package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
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
		client, table, err := tableTarget(ctx, "http://127.0.0.1:1", c.table, "eu-west-1", settings.EnvEffectsTable, "EffectsTable")
		if err != nil || table != c.want || client.Options().Region != "eu-west-1" {
			t.Errorf("tableTarget(--table %q, $%s %q) = %q, %v (region %q); want %q", c.table, settings.EnvEffectsTable, c.env, table, err, client.Options().Region, c.want)
		}
	}
	t.Setenv(settings.EnvEffectsTable, "")
	if _, _, err := tableTarget(ctx, "", "", "", settings.EnvEffectsTable, "EffectsTable"); !errors.As(err, new(noTableError)) {
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
