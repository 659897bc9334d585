package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/tables"
)

const doctorAbout = `Compares deployed DynamoDB tables with template.yaml's (the one built into
this binary, or --template FILE): the table's status (a table or index
being created or deleted, or whose KMS key cannot be used, differs), the key
schema, the secondary indexes, the stream, a global table's replicas (one in
each region the template names, ACTIVE, and in that region its point-in-time
recovery and, on AWS, deletion protection) and its multi-region consistency,
the TTL attribute, point-in-time recovery and, on AWS (not with --endpoint,
whose local tables are made without it), deletion protection, and says what
differs.
Prints "LogicalID<TAB>name<TAB>ok|differs|missing|error|not checked" per table,
then one indented line per difference ("  - ...") and per property the endpoint
cannot report ("  ? ..."); "error" means the table could not be described
in full (the reason goes to standard error: the endpoint unreachable, access
denied, ...; a reason several tables share is said once, then "could not
check" and those tables); differences found before the refusal are still
listed under it.
Exits 0 when every table checked matches, 1 when one is missing, differs or
could not be described, 2 on a usage error (a bad flag, or no table named
at all: no --endpoint, --table or variable).

The template is read with its parameter defaults (a single-region stack),
each --parameter NAME=VALUE in place of its default: give the parameters
that shape the tables as the stack was deployed with them, or a table is
reported to differ where that stack means it to (CrossRegion=fenced-effects
deploys the idempotency and effects tables without TTL,
EffectsConsistency=STRONG the effects table; their sweeper deletes expired
records instead), and a multi-region stack's replicas are checked only with
its ReplicaRegions (--parameter ReplicaRegions=eu-west-1,eu-central-1). A
replica missing in one of them, or not ACTIVE, is a difference; a missing
one's line gives the command that creates it (aws dynamodb update-table
--replica-updates).

Each table's name is --table LogicalID=NAME (with --template, any of its
tables' logical IDs; --only takes them too), else its function's variable
(IDEMPOTENCY_TABLE, EFFECTS_TABLE, RUNS_TABLE, FENCE_TABLE, API_KEYS_TABLE),
else, with --endpoint, PREFIX + its logical ID. A table named by its variable
is checked in the region IDEMPOTENCY_TABLE_REGION, RUNS_TABLE_REGION or
FENCE_TABLE_REGION names, when set and --region is not (a multi-region
replica's functions call those tables in the home region). Without --endpoint it reaches
AWS with the default configuration and checks the tables it has names for.
It only describes tables (dynamodb:DescribeTable, DescribeTimeToLive,
DescribeContinuousBackups; the first and last also in each region of a
global table's ACTIVE replicas).

examples:
  idemkit doctor --endpoint http://127.0.0.1:8000
  idemkit doctor --table IdempotencyTable=orders-idempotency --region eu-west-1
  IDEMPOTENCY_TABLE=orders-idempotency EFFECTS_TABLE=orders-effects idemkit doctor
  idemkit doctor --table IdempotencyTable=prod-IdempotencyTable --parameter CrossRegion=fenced-effects
`

// tableEnv names, per logical ID, the variable that holds the table's name
// in the functions that use it.
var tableEnv = map[string]string{
	"IdempotencyTable": idemenv.Table,
	"EffectsTable":     settings.EnvEffectsTable,
	"RunsTable":        settings.EnvRunsTable,
	"FenceTable":       settings.EnvFenceTable,
	"ApiKeysTable":     settings.EnvAPIKeysTable,
}

// tableRegionEnv names, per logical ID, the variable that holds the home
// region a replica region's functions call that table in (fenced-effects):
// without --region, a table named by its variable is checked there.
var tableRegionEnv = map[string]string{
	"IdempotencyTable": settings.EnvIdempotencyTableRegion,
	"RunsTable":        settings.EnvRunsTableRegion,
	"FenceTable":       settings.EnvFenceTableRegion,
}

// noTableToCheck is doctor's usage error when no table is named.
const noTableToCheck = "no table to check: give --endpoint, --table LogicalID=NAME or the tables' variables"

func runDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	setUsage(fs, "idemkit doctor [--endpoint URL] [--table LogicalID=NAME]... [--only idempotency,effects,runs,fence,api-keys] [--prefix P] [--region R] [--template FILE] [--parameter NAME=VALUE]...", doctorAbout)
	endpoint := endpointFlag(fs, "endpoint", "DynamoDB endpoint `URL` (an emulator or LocalStack); default: AWS, from the default configuration")
	prefix := fs.String("prefix", DefaultTablePrefix, "with --endpoint, a table without a name is PREFIX + its logical ID")
	region := fs.String("region", "", "region (default: the configured one; "+emulator.Region+" with --endpoint)")
	template := fs.String("template", "", "compare with this SAM/CloudFormation template instead of the built-in template.yaml")
	names := map[string]string{}
	fs.Func("table", "the deployed name of a table, LogicalID=NAME or short=NAME (repeatable), e.g. IdempotencyTable=orders-idem", func(v string) error {
		k, n, ok := strings.Cut(v, "=")
		id, known := tableIDs[strings.TrimSpace(k)]
		if !known && logicalIDPattern.MatchString(strings.TrimSpace(k)) {
			// A --template's own logical ID (RED_TEAM 518): checked
			// against the template once it is read.
			id, known = strings.TrimSpace(k), true
		}
		if !ok || !known || strings.TrimSpace(n) == "" {
			return fmt.Errorf("want LogicalID=NAME (IdempotencyTable, EffectsTable, RunsTable, FenceTable, ApiKeysTable) or short=NAME (%s)", strings.Join(tableNames(), ", "))
		}
		if !tableNameOK(strings.TrimSpace(n)) {
			return errors.New(tableNameRule)
		}
		if _, dup := names[id]; dup { // the last would silently win (RED_TEAM 417)
			return fmt.Errorf("%s is given twice: name each table once", id)
		}
		names[id] = strings.TrimSpace(n)
		return nil
	})
	only := onlyFlagOf(fs, "check only these tables (comma-separated, repeatable): "+strings.Join(tableNames(), ", ")+", or a --template's logical IDs", true)
	params := map[string]string{}
	fs.Func("parameter", "a template parameter the stack was deployed with, NAME=VALUE (repeatable), read in place of its default, e.g. CrossRegion=fenced-effects or EffectsConsistency=STRONG", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return errors.New("want NAME=VALUE, a parameter of the template, e.g. CrossRegion=fenced-effects")
		}
		if _, dup := params[strings.TrimSpace(k)]; dup { // the last would silently win (RED_TEAM 417)
			return fmt.Errorf("%s is given twice: give each parameter once", strings.TrimSpace(k))
		}
		params[strings.TrimSpace(k)] = val
		return nil
	})
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected argument %q (takes no arguments)", pos[0])
	}
	if !tablePrefixOK(*prefix) {
		return usageError(fs, stderr, "--prefix %q: %s", *prefix, tablePrefixRule)
	}
	tmplRegion := *region
	if tmplRegion == "" {
		tmplRegion = tables.DefaultRegion
	}
	var defs map[string]tables.Def
	var err error
	if *template != "" {
		// A template that cannot be read or read as one is a bad
		// --template: a usage error, before any table is described.
		b, rerr := os.ReadFile(*template)
		if rerr != nil {
			var pe *os.PathError
			if errors.As(rerr, &pe) {
				rerr = pe.Err // the path is named already
			}
			return usageError(fs, stderr, "--template %q: %v", *template, rerr)
		}
		if defs, err = tables.DefsWithParameters(b, tmplRegion, params); err != nil && !errors.As(err, new(*tables.ParameterError)) {
			return usageError(fs, stderr, "--template %q: %s", *template, strings.TrimPrefix(err.Error(), "tables: "))
		}
	} else {
		defs, err = tables.EmbeddedWithParameters(params)
	}
	if pe := (*tables.ParameterError)(nil); errors.As(err, &pe) {
		// A parameter the template lacks, or a value it does not allow
		// (a typo would read as another stack): a usage error.
		return usageError(fs, stderr, "--parameter %q: %s", pe.Name+"="+pe.Value, pe.Reason)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit doctor: %v\n", err)
		return 1
	}
	if len(defs) == 0 {
		// Nothing to compare with (RED_TEAM 519): said as such, not as
		// tables left unnamed.
		return usageError(fs, stderr, "--template %q: has no DynamoDB table (AWS::DynamoDB::Table or AWS::DynamoDB::GlobalTable) to compare with", *template)
	}
	ids := *only
	if len(ids) == 0 {
		for id := range defs {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ok := defs[id]; !ok {
			// --only names a table the template (--template) lacks.
			return usageError(fs, stderr, "--only: the template has no table %s (%s; its tables: %s)", id, templateName(*template), strings.Join(slices.Sorted(maps.Keys(defs)), ", "))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(names)) {
		if _, ok := defs[id]; !ok {
			// --table names a table the template lacks (RED_TEAM 518).
			tables := strings.Join(slices.Sorted(maps.Keys(defs)), ", ")
			if *template == "" {
				tables += "; or short: " + strings.Join(tableNames(), ", ")
			}
			return usageError(fs, stderr, "--table %s=%s: the template has no table %s (%s; its tables: %s)", id, names[id], id, templateName(*template), tables)
		}
	}
	if !slices.ContainsFunc(ids, func(id string) bool { return *endpoint != "" || names[id] != "" || os.Getenv(tableEnv[id]) != "" }) {
		// Nothing names a table to check: a usage error, said before
		// anything is described or printed.
		return usageError(fs, stderr, noTableToCheck)
	}
	for _, id := range ids {
		// A variable's name DynamoDB would refuse: a usage error naming
		// it, before anything is described.
		if v := os.Getenv(tableEnv[id]); names[id] == "" && v != "" && !tableNameOK(v) {
			return usageError(fs, stderr, "%v", badTableError{"$" + tableEnv[id], v})
		}
	}
	var c *dynamodb.Client
	if *endpoint != "" {
		c = endpointClient(*endpoint, func(o *dynamodb.Options) {
			if *region != "" {
				o.Region = *region
			}
		})
	} else {
		if c, err = awsClient(ctx); err != nil {
			fmt.Fprintf(stderr, "idemkit doctor: %v\n", err)
			return 1
		}
		if *region != "" {
			c = dynamodb.New(c.Options(), func(o *dynamodb.Options) { o.Region = *region })
		}
	}
	failed, differs := false, false
	var faults doctorFaults
	var unasked []string // tables whose replicas the template read does not name
	for _, id := range ids {
		d := defs[id]
		if *endpoint != "" {
			// The tables at an endpoint (an emulator's, LocalStack's:
			// `idemkit tables create`'s and dev's) are made without
			// deletion protection, so that they can be deleted: it is
			// compared on AWS only (RED_TEAM 515).
			d.DeletionProtection = false
			reps := map[string]tables.ReplicaSetting{}
			for region, rs := range d.ReplicaSettings {
				rs.DeletionProtection = false
				reps[region] = rs
			}
			d.ReplicaSettings = reps
		}
		name, tc := names[id], c
		if name == "" && tableEnv[id] != "" {
			name = os.Getenv(tableEnv[id])
			if home := os.Getenv(tableRegionEnv[id]); name != "" && home != "" && *region == "" && tableRegionEnv[id] != "" {
				tc = dynamodb.New(c.Options(), func(o *dynamodb.Options) { o.Region = home })
			}
		}
		if name == "" && *endpoint != "" {
			name = *prefix + id
		}
		if name == "" {
			if tableEnv[id] == "" { // a --template's own table: no variable names it
				fmt.Fprintf(stdout, "%s\t-\tnot checked\n  ? no name: give --table %s=NAME\n", id, id)
				continue
			}
			fmt.Fprintf(stdout, "%s\t-\tnot checked\n  ? no name: give --table %s=NAME or $%s\n", id, id, tableEnv[id])
			continue
		}
		r, err := tables.Check(ctx, tc, d, name)
		// Each ACTIVE replica in its own region: what DynamoDB keeps per
		// replica (RED_TEAM 516). A refusal there makes the table error.
		for _, region := range r.ActiveReplicas {
			if err != nil || r.Missing {
				break
			}
			rc := dynamodb.New(tc.Options(), func(o *dynamodb.Options) { o.Region = region })
			var rr tables.Report
			rr, err = tables.CheckReplica(ctx, rc, d, name, region)
			r.Differences = append(r.Differences, rr.Differences...)
			r.Unchecked = append(r.Unchecked, rr.Unchecked...)
		}
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "%s\t%s\terror\n", id, name)
			// What the calls before the failed one showed wrong (a key
			// schema, before DescribeTimeToLive was refused) is said too
			// (RED_TEAM 461).
			for _, d := range r.Differences {
				fmt.Fprintf(stdout, "  - %s\n", d)
			}
			faults.add(id, name, storeError(err))
			failed = true
			continue
		case r.Missing:
			fmt.Fprintf(stdout, "%s\t%s\tmissing\n  - no table of this name in %s (renamed, deleted or never created: fix the name the function is given, or create it from the template)\n", id, name, regionName(tc))
			failed = true
			continue
		case r.OK():
			fmt.Fprintf(stdout, "%s\t%s\tok\n", id, name)
		default:
			fmt.Fprintf(stdout, "%s\t%s\tdiffers\n", id, name)
			failed, differs = true, true
		}
		for _, d := range r.Differences {
			fmt.Fprintf(stdout, "  - %s\n", d)
		}
		for _, u := range r.Unchecked {
			fmt.Fprintf(stdout, "  ? %s\n", u)
		}
		if d.Type == "AWS::DynamoDB::GlobalTable" && len(d.ReplicaRegions) == 0 && len(r.Replicas) > 0 {
			unasked = append(unasked, fmt.Sprintf("%s (replicas in %s)", id, strings.Join(r.Replicas, ", ")))
		}
	}
	faults.say(stderr)
	if differs && len(params) == 0 && *template == "" {
		// The stack may have been deployed with parameters of the built-in
		// template.yaml that shape its tables otherwise: say how to check
		// it as deployed.
		fmt.Fprintln(stderr, "idemkit doctor: the template was read with its parameter defaults (a single-region stack); "+
			"for a stack deployed with others, give them: --parameter CrossRegion=fenced-effects, --parameter EffectsConsistency=STRONG, --parameter ReplicaRegions=eu-west-1")
	}
	if len(unasked) > 0 {
		// A global table's replicas the template, as read, names none of
		// (a multi-region stack checked with the defaults): not checked,
		// which ok must not be read to say (RED_TEAM 486).
		give := "give the parameters the stack was deployed with (--parameter NAME=VALUE)"
		if *template == "" {
			give = "give the home stack's --parameter ReplicaRegions=... and --parameter CrossRegion=..."
		}
		fmt.Fprintf(stderr, "idemkit doctor: not checked: the replicas of %s: the template as read names no replica regions for them; %s\n", strings.Join(unasked, "; "), give)
	}
	if failed {
		return 1
	}
	return 0
}

// doctorFaults gathers why tables could not be described, so that one
// fault shared by several (an engine that cannot be reached, credentials
// refused) is said once, then the tables it kept from being checked, not
// once per table.
type doctorFaults struct {
	reasons []string            // in the order first met
	full    map[string]string   // reason: the first table's whole message
	tables  map[string][]string // reason: the logical IDs it kept from being checked
}

// add records that table id, named name, could not be described: msg, the
// message naming it; its reason is msg after the name ("describe NAME: ").
func (f *doctorFaults) add(id, name, msg string) {
	reason := msg
	if i := strings.Index(msg, name+": "); i >= 0 {
		reason = msg[i+len(name)+2:]
	}
	if f.full == nil {
		f.full, f.tables = map[string]string{}, map[string][]string{}
	}
	if _, ok := f.full[reason]; !ok {
		f.reasons = append(f.reasons, reason)
		f.full[reason] = msg
	}
	f.tables[reason] = append(f.tables[reason], id)
}

// say writes each fault to w: a fault of one table in its own message, as
// it came; one several tables share once, then "could not check" and those
// tables.
func (f *doctorFaults) say(w io.Writer) {
	for _, r := range f.reasons {
		if ids := f.tables[r]; len(ids) > 1 {
			fmt.Fprintf(w, "idemkit doctor: %s\nidemkit doctor: could not check %s\n", r, strings.Join(ids, ", "))
		} else {
			fmt.Fprintf(w, "idemkit doctor: %s\n", f.full[r])
		}
	}
}

// templateName names the template doctor compares with, for a message.
func templateName(file string) string {
	if file == "" {
		return "the built-in template.yaml"
	}
	return file
}

// regionName names c's region for a message ("region eu-west-1"), or
// "this region" when c has none set.
func regionName(c *dynamodb.Client) string {
	if r := c.Options().Region; r != "" {
		return "region " + r
	}
	return "this region"
}
