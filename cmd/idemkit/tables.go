package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/tables"
)

// DefaultTablePrefix names local tables: prefix + logical ID
// ("idemkit-RunsTable").
const DefaultTablePrefix = tables.DefaultPrefix

const tablesCreateAbout = `Creates the DynamoDB tables of template.yaml (idempotency, effects, runs,
fence, api-keys) at an endpoint, each named PREFIX + its logical ID, and
prints "LogicalID<TAB>name" per table. A table that already exists is kept.

examples:
  idemkit tables create --endpoint http://127.0.0.1:8000
  idemkit tables create --endpoint http://127.0.0.1:8000 --only idempotency --prefix myapp-
`

// runTables dispatches `idemkit tables SUBCOMMAND`.
func runTables(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return tablesCommands.dispatch(ctx, args, stdout, stderr)
}

func runTablesCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tables create", flag.ContinueOnError)
	setUsage(fs, "idemkit tables create --endpoint URL [--only idempotency,effects,runs,fence,api-keys] [--prefix P] [--region R]", tablesCreateAbout)
	endpoint := endpointFlag(fs, "endpoint", "DynamoDB endpoint `URL` (an emulator or LocalStack); required")
	prefix := fs.String("prefix", DefaultTablePrefix, "table name prefix: each table is named PREFIX + its logical ID")
	region := fs.String("region", emulator.Region, "region sent to the endpoint")
	only := onlyFlag(fs, "create only these tables (comma-separated, repeatable): "+strings.Join(tableNames(), ", ")+
		"; e.g. --only idempotency for the idem library alone")
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected argument %q (every input is a flag)", pos[0])
	}
	if *endpoint == "" {
		return usageError(fs, stderr, "--endpoint URL is required")
	}
	if !tablePrefixOK(*prefix) {
		return usageError(fs, stderr, "--prefix %q: %s", *prefix, tablePrefixRule)
	}
	c := endpointClient(*endpoint, func(o *dynamodb.Options) { o.Region = *region })
	names, err := tables.Ensure(ctx, c, *prefix, *only)
	ids := make([]string, 0, len(names))
	for id := range names {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(stdout, "%s\t%s\n", id, names[id])
	}
	if err != nil && mayHaveWritten(err) {
		// The change landed with its answer lost, then failed: the table
		// may exist, as it would after a run cut short (RED_TEAM 368).
		fmt.Fprintf(stderr, "idemkit tables create: %s; a try before got no answer, so that change may have been made: run the same command again, which finds what exists and finishes the rest\n", storeError(err))
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit tables create: %s\n", storeError(err))
		return 1
	}
	return 0
}

// tableIDs maps the names --only accepts (short names and logical IDs) to
// the template's logical IDs.
var tableIDs = map[string]string{
	"idempotency": "IdempotencyTable", "effects": "EffectsTable", "runs": "RunsTable",
	"fence": "FenceTable", "api-keys": "ApiKeysTable",
	"IdempotencyTable": "IdempotencyTable", "EffectsTable": "EffectsTable", "RunsTable": "RunsTable",
	"FenceTable": "FenceTable", "ApiKeysTable": "ApiKeysTable",
}

// tableNames lists the short names --only accepts.
func tableNames() []string { return []string{"idempotency", "effects", "runs", "fence", "api-keys"} }

// tablesCommands are the commands of `idemkit tables`.
var tablesCommands = commandList{
	group: "tables",
	about: "Manage the DynamoDB tables of template.yaml outside AWS.",
	entries: []entry{
		{"create", "create the tables at an endpoint (an emulator or LocalStack)", runTablesCreate},
	},
	examples: []string{
		"idemkit tables create --endpoint http://127.0.0.1:8000",
	},
}

// onlyFlag adds --only to fs (usage as given): table names, comma-separated
// and repeatable, collected as their logical IDs.
func onlyFlag(fs *flag.FlagSet, usage string) *[]string { return onlyFlagOf(fs, usage, false) }

// logicalIDPattern is what a CloudFormation logical ID is: letters and
// digits.
var logicalIDPattern = regexp.MustCompile(`^[A-Za-z0-9]{1,255}$`)

// onlyFlagOf is onlyFlag; with anyID a name that is no table of
// template.yaml but reads as a logical ID is kept too, for the caller to
// check against the template it reads (doctor's --template).
func onlyFlagOf(fs *flag.FlagSet, usage string, anyID bool) *[]string {
	var only []string
	fs.Func("only", usage, func(v string) error {
		for _, n := range strings.Split(v, ",") {
			id, ok := tableIDs[strings.TrimSpace(n)]
			if !ok && anyID && logicalIDPattern.MatchString(strings.TrimSpace(n)) {
				id, ok = strings.TrimSpace(n), true
			}
			if !ok {
				return fmt.Errorf("unknown table %q (one of %s)", strings.TrimSpace(n), strings.Join(tableNames(), ", "))
			}
			if !slices.Contains(only, id) { // named twice, one table (RED_TEAM 517)
				only = append(only, id)
			}
		}
		return nil
	})
	return &only
}
