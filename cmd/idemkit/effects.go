package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/ids"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
)

func runEffects(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return effectsCommands.dispatch(ctx, args, stdout, stderr)
}

// storeFlags are the flags every effects command takes to reach the
// effects table.
type storeFlags struct {
	endpoint, table, region *string
	json                    *bool
	// where names the effects table the ledger reads, once built: "table
	// T in REGION", for a message that found nothing there.
	where *string
	// tableName and at are the effects table's name and where the flags
	// point ("at URL", "in region R"), once the ledger is built, for a
	// message that says the table is missing or another (storeError).
	tableName, at *string
}

// storeFlagsLine is the usage-line form of the flags addStoreFlags adds.
const storeFlagsLine = "[--endpoint URL] [--table NAME] [--region R] [--json]"

func addStoreFlags(fs *flag.FlagSet) storeFlags {
	return storeFlags{
		endpoint:  endpointFlag(fs, "endpoint", "DynamoDB endpoint `URL` (an emulator, or the one idemkit dev prints); default: AWS, with the default credential chain"),
		table:     fs.String("table", "", "effects table; default $"+settings.EnvEffectsTable+", or "+DefaultTablePrefix+"EffectsTable with --endpoint"),
		region:    fs.String("region", "", "region; default the AWS configuration's ("+emulator.Region+" with --endpoint)"),
		json:      fs.Bool("json", false, "print JSON instead of text"),
		where:     new(string),
		tableName: new(string),
		at:        new(string),
	}
}

// storeError renders the error of a ledger call for the operator as
// storeError does, but an effects table that does not exist where the
// flags point, or whose key schema is not the effects table's (another
// table named by mistake), is said as the apikey and webhook commands say
// a missing table: which table, where, and what to do, not the library's
// error chain (RED_TEAM 359).
func (sf storeFlags) storeError(err error) string {
	if !errors.Is(err, ledger.ErrStoreMisconfigured) || *sf.tableName == "" {
		return storeError(err)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ResourceNotFoundException" {
		return fmt.Sprintf("table %q does not exist %s: name the effects table with --table (or $%s), or create it "+
			"(idemkit tables create --only effects --endpoint URL; on AWS, deploy template.yaml)", *sf.tableName, *sf.at, settings.EnvEffectsTable)
	}
	return fmt.Sprintf("table %q %s is not an effects table: its key schema is not template.yaml's EffectsTable's (pk S and sk S, GSI %s): "+
		"name the effects table with --table (or $%s); idemkit doctor --table EffectsTable=%s says how it differs",
		*sf.tableName, *sf.at, ledgerdynamo.IndexByRun, settings.EnvEffectsTable, *sf.tableName)
}

// effectsClock is the clock the effects commands judge leases by: nil,
// the system clock of the machine they run on (the operator's own). Tests
// set a clock they move by hand.
var effectsClock ledger.Clock

func (sf storeFlags) ledger(ctx context.Context) (*ledger.Ledger, error) {
	c, table, err := tableTarget(ctx, *sf.endpoint, *sf.table, *sf.region, "--table", settings.EnvEffectsTable, "EffectsTable")
	if err != nil {
		return nil, err
	}
	*sf.where = fmt.Sprintf("table %s in %s", table, c.Options().Region)
	*sf.tableName, *sf.at = table, tableWhere(c, *sf.endpoint)
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: table})
	if err != nil {
		return nil, err
	}
	return ledger.New(ledger.Config{Store: st, Test: ledger.TestConfig{Clock: effectsClock}})
}

// fenceGiven reports whether a fence table is given: the --fence-table
// flag's value table, else $FENCE_TABLE.
func fenceGiven(table string) bool {
	return table != "" || os.Getenv(settings.EnvFenceTable) != ""
}

// fencedLedger is ledger with the deployment's fence as its Fencer when a
// fence table is given (the flag, else $FENCE_TABLE), else ledger. With a
// fence, the effects table is reached in the fence table's region too:
// under fenced-effects the home region decides every effect record (the
// functions reach it there, kit.HomeClient with FENCE_TABLE_REGION), and a
// resolution written into another region's replica would replicate over
// the home record, last writer winning.
//
// The fence table is read first (one GetItem of effectID's fence item): it
// is the home region's alone, so a region where it is not found is not the
// home region, and nothing is resolved there (errFenceNotHere).
func (sf storeFlags) fencedLedger(ctx context.Context, table, region, effectID string) (*ledger.Ledger, *fencedynamo.Store, error) {
	if !fenceGiven(table) {
		l, err := sf.ledger(ctx)
		return l, nil, err
	}
	if region == "" {
		region = os.Getenv(settings.EnvFenceTableRegion)
	}
	if region == "" {
		region = *sf.region
	}
	c, table, err := tableTarget(ctx, *sf.endpoint, table, region, "--fence-table", settings.EnvFenceTable, "FenceTable")
	if err != nil {
		return nil, nil, err
	}
	fs, err := fencedynamo.New(fencedynamo.Config{Client: c, Table: table})
	if err != nil {
		return nil, nil, err
	}
	if _, err := fs.Get(ctx, effectID); errors.As(err, new(*types.ResourceNotFoundException)) {
		return nil, nil, errFenceNotHere{table: table, region: c.Options().Region}
	} else if err != nil {
		return nil, nil, err
	}
	owner, err := fence.New(fence.Config{Store: fs})
	if err != nil {
		return nil, nil, err
	}
	ec, etable, err := tableTarget(ctx, *sf.endpoint, *sf.table, region, "--table", settings.EnvEffectsTable, "EffectsTable")
	if err != nil {
		return nil, nil, err
	}
	*sf.where = fmt.Sprintf("table %s in %s", etable, ec.Options().Region)
	*sf.tableName, *sf.at = etable, tableWhere(ec, *sf.endpoint)
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: ec, Table: etable})
	if err != nil {
		return nil, nil, err
	}
	l, err := ledger.New(ledger.Config{Store: st, Fencer: owner, Test: ledger.TestConfig{Clock: effectsClock}})
	return l, fs, err
}

// errFenceNotHere: the fence table is not found in the region the command
// took for the home region.
type errFenceNotHere struct{ table, region string }

func (e errFenceNotHere) Error() string {
	return fmt.Sprintf("fence table %s not found in %s: under fenced-effects it is in the home region only, "+
		"where every effect record is decided; give --fence-region with the home region (or $%s), "+
		"so the record is not resolved in another region's replica", e.table, e.region, settings.EnvFenceTableRegion)
}

func runEffectsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("effects list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", "", "keep effects in this state: escaped, in-flight, pending, completed or failed (default: all)")
	run := fs.String("run", "", "keep the effects of this run (its runId); without it the whole table is scanned")
	limit := intFlag(fs, "limit", 100, "stop after `N` effects, N in decimal digits: the first the scan finds, not the oldest (0: no limit)")
	sf := addStoreFlags(fs)
	setUsage(fs, "idemkit effects list [--state STATE] [--run ID] [--limit N] "+storeFlagsLine, `List effects, oldest write first (among the --limit first found). An escaped effect may have reached its
provider without a recorded outcome; settle it with 'idemkit effects resolve'.
Without --run the whole effects table is scanned (operator use only).

examples:
  idemkit effects list --state escaped --endpoint http://127.0.0.1:8000
  idemkit effects list --state escaped --run acme/q2yBw6TpQ0Ks9PcFTF3w1g --table prod-EffectsTable
`)
	pos, code, done := parseFlags(fs, args, true, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected argument %q (takes no arguments)", pos[0])
	}
	switch ledger.EffectState(*state) {
	case "", ledger.EffectEscaped, ledger.EffectInFlight, ledger.EffectPending, ledger.EffectCompleted, ledger.EffectFailed:
	default:
		return usageError(fs, stderr, "--state %q: want escaped, in-flight, pending, completed or failed", *state)
	}
	if *limit < 0 {
		return usageError(fs, stderr, "--limit %d: want 0 (no limit) or more", *limit)
	}
	if *run != "" {
		if *run = unproject(*run); !ids.ValidRunID(*run) {
			return usageError(fs, stderr, "--run %q: want a runId, %s", *run, ids.TenantBoundRule)
		}
	}
	l, err := sf.ledger(ctx)
	if isTableUsage(err) {
		return usageError(fs, stderr, "%v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit effects list: %v\n", err)
		return 1
	}
	vs, err := l.ListEffects(ctx, ledger.Filter{State: ledger.EffectState(*state), RunID: *run, Limit: *limit})
	if err != nil {
		fmt.Fprintf(stderr, "idemkit effects list: %s\n", sf.storeError(err))
		return 1
	}
	if *sf.json {
		return printJSON(stdout, stderr, viewsJSON(vs))
	}
	if len(vs) == 0 {
		// What it looked for, and where: "no effects" alone would be
		// false of a table (or run) whose effects are in other states.
		what := "effects"
		if *state != "" {
			what = *state + " effects"
		}
		if *run != "" {
			what += " of run " + *run
		}
		fmt.Fprintf(stdout, "no %s in %s\n", what, *sf.where)
		return 0
	}
	if *limit > 0 && len(vs) >= *limit {
		defer fmt.Fprintf(stderr, "idemkit effects list: stopped at --limit %d: more effects may match (these are the first the scan found, oldest first among them)\n", *limit)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EFFECT\tSTATE\tATTEMPT\tNEXT ATTEMPT\tRUN\tUPDATED")
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%s\t%d of %d\t%s\t%s\t%s\n", v.EffectID, v.State, v.Attempt, v.MaxAttempts, nextAttempt(v), dash(v.RunID), stamp(v.UpdatedAt))
	}
	_ = tw.Flush()
	return 0
}

func runEffectsShow(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("effects show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sf := addStoreFlags(fs)
	setUsage(fs, "idemkit effects show EFFECT "+storeFlagsLine, `Show an effect and every attempt at it: when each fired (a fire time means
the request may have reached the provider), how it ended, and the effect's
revision. 'idemkit effects resolve' is fenced on that revision: it is
refused if the effect changed since you last showed it.

example:
  idemkit effects show acme/3q9Xv0d2mJm8L1hZ1H3vO3n8cZkqv4pVwzXyq2Wc0bE --endpoint http://127.0.0.1:8000
`)
	arg, code, done := parseOneArg(fs, "EFFECT", args, stdout, stderr)
	if done {
		return code
	}
	effectID := unproject(arg) // named so from here on, as resolve names it
	if !ids.ValidEffectID(effectID) {
		return usageError(fs, stderr, effectIDWant, arg, ids.TenantBoundRule)
	}
	l, err := sf.ledger(ctx)
	if isTableUsage(err) {
		return usageError(fs, stderr, "%v", err)
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit effects show: %s\n", storeError(err))
		return 1
	}
	v, err := l.ShowEffect(ctx, effectID)
	if errors.Is(err, ledger.ErrEffectNotFound) {
		fmt.Fprintf(stderr, "idemkit effects show: no effect %s in %s (under fenced-effects, effect records are in the home region: --region)\n", effectID, *sf.where)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit effects show: %s\n", sf.storeError(err))
		return 1
	}
	if err := rememberShown(v); err != nil {
		fmt.Fprintf(stderr, "idemkit effects show: cannot remember the revision for resolve: %v\n", err)
	}
	if *sf.json {
		return printJSON(stdout, stderr, viewJSON(v))
	}
	printView(stdout, v)
	return 0
}

func runEffectsResolve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("effects resolve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	as := fs.String("as", "", "what happened: delivered (the provider performed it) or not-delivered (it did not; the next try fires with the same provider key); required")
	note := fs.String("note", "", "free text recorded with the resolution (at most 512 bytes)")
	operator := fs.String("operator", "", "who resolves, recorded on the resolution without the white space around it; default $IDEMKIT_OPERATOR (white space only is refused, not replaced), else user@host")
	rev := fs.String("rev", "", "the revision you decided on (from 'idemkit effects show'); default the one your last show of this effect printed, so required where it was not shown")
	fenceTable := fs.String("fence-table", "", "fenced-effects deployments: the fence table (default $"+settings.EnvFenceTable+"); resolving a fenced effect as not-delivered reopens its fence there")
	fenceRegion := fs.String("fence-region", "", "the fence table's region, the home region, where the effect record is then read and written too (default $"+settings.EnvFenceTableRegion+", else --region)")
	sf := addStoreFlags(fs)
	setUsage(fs, "idemkit effects resolve EFFECT --as delivered|not-delivered [--note TEXT] [--operator NAME] [--rev REV] [--fence-table NAME] [--fence-region R]\n       "+storeFlagsLine, `Record what an operator found out about an escaped effect, as an attempt row
carrying the operator's identity (it shows in the run's effects witness).
  delivered      the provider performed the effect: it is completed, and
                 every later try replays that success without a request;
  not-delivered  it did not: the effect is released for one more attempt,
                 which its run's next try fires with the same provider key
                 (a run that has already ended makes no more tries). It
                 also grants one more attempt to an effect shown pending
                 and exhausted (its tries since the last settlement, or
                 since the first, never reached the provider).
Fenced: show the effect first; the resolution is refused if the effect
changed since (another attempt, a reclaim, another resolution).
Under fenced-effects the fence remembers the escaped attempt's pass and
would refuse that one more attempt: not-delivered needs --fence-table (and
--fence-region when it is not this region), and reopens the fence for that
attempt's token first. With the fence table given, the effect record is read
and written in the fence's region, the home region, which decides every
effect record: never in another region's replica; the fence table is read
there first, and a region where it is not found (a replica's: it is the home
region's alone) is refused. Without it a fenced effect is refused either way
(delivered too): the home region's table cannot be told from a replica.

examples:
  idemkit effects show acme/3q9Xv0d2mJm8L1hZ1H3vO3n8cZkqv4pVwzXyq2Wc0bE --endpoint http://127.0.0.1:8000
  idemkit effects resolve acme/3q9Xv0d2mJm8L1hZ1H3vO3n8cZkqv4pVwzXyq2Wc0bE --as delivered \
      --note "charge ch_123 found in the provider console" --endpoint http://127.0.0.1:8000
`)
	arg, code, done := parseOneArg(fs, "EFFECT", args, stdout, stderr)
	if done {
		return code
	}
	effectID := unproject(arg)
	settle := ledger.Settlement(*as)
	if settle != ledger.Delivered && settle != ledger.NotDelivered {
		if *as == "" {
			return usageError(fs, stderr, "--as delivered or --as not-delivered is required")
		}
		return usageError(fs, stderr, "--as %q: want delivered or not-delivered", *as)
	}
	if !ids.ValidEffectID(effectID) {
		return usageError(fs, stderr, effectIDWant, arg, ids.TenantBoundRule)
	}
	var opFrom string
	*operator, opFrom = operatorIdentity(*operator)
	if !namesSomeone(*operator) {
		return usageError(fs, stderr, "%s %q names no one: want 1..128 bytes of printable UTF-8 text, not white space only", opFrom, *operator)
	}
	if len(*operator) > 128 || strings.ContainsFunc(*operator, isControlRune) || !utf8.ValidString(*operator) {
		return usageError(fs, stderr, "%s %q: want 1..128 bytes of printable UTF-8 text", opFrom, *operator)
	}
	if why := noteProblem(*note); why != "" {
		return usageError(fs, stderr, "--note: want at most 512 bytes of printable UTF-8 text and line breaks (%s)", why)
	}
	l, fstore, err := sf.fencedLedger(ctx, *fenceTable, *fenceRegion, effectID)
	if isTableUsage(err) {
		return usageError(fs, stderr, "%v", err)
	}
	if errors.As(err, new(errFenceNotHere)) {
		fmt.Fprintf(stderr, "idemkit effects resolve: refused: %v\n", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "idemkit effects resolve: %s\n", storeError(err))
		return 1
	}
	if *rev == "" {
		r, err := shownRev(effectID)
		if err != nil || r == "" {
			// Nothing to decide on: the revision is an input, missing.
			return usageError(fs, stderr, "--rev REV is required: no show of this effect is remembered here; pass the rev 'idemkit effects show %s' prints (the resolution is fenced on what you saw)", effectID)
		}
		*rev = r
	}
	v, err := l.Resolve(ctx, effectID, ledger.Resolution{As: settle, Operator: *operator, Note: *note, Rev: *rev})
	switch {
	case errors.Is(err, ledger.ErrResolveNeedsFence) && settle == ledger.NotDelivered:
		fmt.Fprintln(stderr, "idemkit effects resolve: refused: the effect is fenced, and its fence would refuse the attempt a not-delivered resolution releases; give the deployment's fence table (--fence-table, --fence-region)")
		return 1
	case errors.Is(err, ledger.ErrResolveNeedsFence):
		fmt.Fprintln(stderr, "idemkit effects resolve: refused: the effect is fenced (fenced-effects), so its record is decided in the home region, "+
			"and without the fence table this command cannot tell the home region's table from a replica, whose copy would replicate over the home record; "+
			"give the deployment's fence table (--fence-table, and --fence-region with the home region): the record is then read and written there")
		return 1
	case errors.Is(err, fence.ErrIssued):
		// In the CLI's words, not the library's (RED_TEAM 331).
		fmt.Fprintf(stderr, "idemkit effects resolve: refused: %s, not the escaped attempt's, so --as not-delivered cannot release effect %s for one more attempt "+
			"(nothing written): that attempt may have reached the provider; show it again (idemkit effects show %s) and decide on what it is then: "+
			"once that attempt's outcome is recorded there is nothing to resolve, and if the provider performed the effect while it still shows escaped, "+
			"resolve it --as delivered\n", passedBy(err), effectID, effectID)
		return 1
	case errors.Is(err, ledger.ErrFenceReopenUnknown):
		fmt.Fprintf(stderr, "idemkit effects resolve: %s\n", reopenUnknown(ctx, fstore, effectID, err))
		return 1
	case errors.Is(err, ledger.ErrChanged):
		now := ""
		if v.State != "" {
			now = fmt.Sprintf(" (it is now %s, attempt %d, rev %s)", v.State, v.Attempt, v.Rev)
		}
		fmt.Fprintf(stderr, "idemkit effects resolve: refused: the revision decided on is not the effect's current one: the effect changed since it was shown (or was shown in flight and its attempt has stopped since), or --rev names a revision it never had%s; show it again and decide on what it is now\n", now)
		if errors.Is(err, ledger.ErrFenceReopened) {
			fmt.Fprintln(stderr, "idemkit effects resolve: the fence was already reopened for the escaped attempt: unless the effect now has an outcome (show it again), its next try fires it once with the same provider key")
		}
		return 1
	case errors.Is(err, ledger.ErrFenceReopened):
		// The fence was reopened, and writing the resolution failed
		// (RED_TEAM 333).
		fmt.Fprintf(stderr, "idemkit effects resolve: the fence of effect %s was reopened for the escaped attempt, but recording the resolution failed (%s): "+
			"show it (idemkit effects show %s): released or pending, the resolution was recorded after all; still escaped, it was not recorded, "+
			"and running the same command again records it: %s\n", effectID, fenceCause(err), effectID, resolveAgain(effectID))
		return 1
	case errors.Is(err, ledger.ErrNotEscaped):
		fmt.Fprintf(stderr, "idemkit effects resolve: refused: effect %s is not escaped: %s\n", effectID, notEscapedAdvice(v))
		return 1
	case errors.Is(err, ledger.ErrAttemptsExhausted):
		// In the CLI's words, not the library's error text (RED_TEAM 322).
		fmt.Fprintf(stderr, "idemkit effects resolve: refused: effect %s holds %d attempts, and one effect record has no room for the row "+
			"and the attempt of another not-delivered resolution; perform the effect by hand (or find it performed) and resolve it --as delivered, "+
			"or leave it: its identity is tried afresh once this record passes its retention\n", effectID, v.Attempt)
		return 1
	case errors.Is(err, ledger.ErrEffectNotFound):
		where := "--region"
		if fenceGiven(*fenceTable) {
			where = "--fence-region" // the fence's region is where the record was looked for
		}
		fmt.Fprintf(stderr, "idemkit effects resolve: no effect %s in %s (under fenced-effects, effect records are in the home region: %s)\n", effectID, *sf.where, where)
		return 1
	case mayHaveWritten(err):
		// The record's write landed with its answer lost, then failed:
		// the resolution may be recorded (RED_TEAM 367).
		fmt.Fprintf(stderr, "idemkit effects resolve: recording the resolution failed (%s), but a try before got no answer, so it may have been recorded: "+
			"show it (idemkit effects show %s): %s, it was recorded; still escaped, it was not, and running the same command again records it: idemkit effects resolve %s --as %s\n",
			storeError(err), effectID, resolvedState(settle), effectID, settle)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "idemkit effects resolve: %s\n", sf.storeError(err))
		return 1
	}
	_ = rememberShown(v)
	if *sf.json {
		return printJSON(stdout, stderr, viewJSON(v))
	}
	fmt.Fprintf(stdout, "resolved %s as %s by %s: the effect is now %s\n", v.EffectID, settle, *operator, v.State)
	if settle == ledger.NotDelivered {
		fmt.Fprintf(stdout, "its run's next try fires attempt %d with the same provider key %s; a run that has already ended tries no more (POST /runs/{runId}/retry starts a new run of it)\n", v.Attempt+1, v.ProviderKey)
	}
	return 0
}

// effectIDWant is the usage error of an EFFECT argument that is no
// effectId: the argument as given, and the grammar.
const effectIDWant = "EFFECT %q: want an effectId, %s, as 'idemkit effects list' prints it"

// unproject accepts an id as served in a URL path segment too
// ("acme~2Fabc" for "acme/abc").
func unproject(id string) string {
	return strings.NewReplacer("~2F", "/", "~2f", "/", "~3A", ":", "~3a", ":", "~7E", "~", "~7e", "~").Replace(id)
}

// isControlRune reports a control character the ledger refuses in an
// operator's identity or note (a note may hold line breaks): C0, DEL and
// C1.
// noteProblem says what keeps a --note from being recorded: what it holds
// that is not printable UTF-8 text or a line break (a carriage return
// pasted with Windows line breaks, bytes that are not UTF-8), and where,
// else its length past 512 bytes (RED_TEAM 435); "" for a note recorded as
// it is.
func noteProblem(note string) string {
	for i, c := range note {
		switch {
		case c == utf8.RuneError && !strings.HasPrefix(note[i:], "\uFFFD"):
			return fmt.Sprintf("it is not UTF-8 at byte %d", i)
		case c != '\n' && isControlRune(c):
			return fmt.Sprintf("it holds a control character (U+%04X) at byte %d", c, i)
		}
	}
	if len(note) > 512 {
		return fmt.Sprintf("got %d bytes", len(note))
	}
	return ""
}

func isControlRune(c rune) bool { return c < 0x20 || c >= 0x7f && c < 0xa0 }

// namesSomeone reports whether an operator identity has a visible
// character (a letter, digit, punctuation or symbol), as the ledger
// requires: white space and invisible format characters alone name no one.
func namesSomeone(s string) bool {
	return strings.ContainsFunc(s, func(c rune) bool { return unicode.In(c, unicode.L, unicode.N, unicode.P, unicode.S) })
}

// operatorIdentity is the operator recorded on a resolution: flag (the
// --operator value) when given, else $IDEMKIT_OPERATOR when set and not
// empty, else user@host; from names where it came from, for a usage error.
// The white space around a name is trimmed (a paste's stray space or line
// break is not part of it); a value of white space only is returned as
// given, so that resolve refuses it as naming no one: an operator who set
// $IDEMKIT_OPERATOR means that identity, and one of blanks is a mistake to
// report, not a reason to record user@host instead (RED_TEAM 321).
func operatorIdentity(flag string) (op, from string) {
	if flag != "" {
		return trimBlank(flag), "--operator"
	}
	if o := os.Getenv("IDEMKIT_OPERATOR"); o != "" {
		return trimBlank(o), "$IDEMKIT_OPERATOR"
	}
	return defaultOperator()
}

// trimBlank trims the white space around s, unless s is nothing else.
func trimBlank(s string) string {
	if t := strings.TrimSpace(s); t != "" {
		return t
	}
	return s
}

// defaultOperator is the operator recorded when neither --operator nor
// $IDEMKIT_OPERATOR gives one: user@host; from names where it came from.
func defaultOperator() (op, from string) {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	h, _ := os.Hostname()
	if h == "" {
		return name, "the user name (set --operator)"
	}
	return name + "@" + h, "user@host (set --operator)"
}

// shownDir keeps the revision of each effect an operator last showed, so
// that resolve is fenced on what was shown.
func shownDir() (string, error) {
	if d := os.Getenv("IDEMKIT_STATE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "idemkit", "shown"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "idemkit", "shown"), nil
}

func shownFile(effectID string) (string, error) {
	d, err := shownDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(effectID))
	return filepath.Join(d, hex.EncodeToString(h[:16])), nil
}

func rememberShown(v ledger.EffectView) error {
	f, err := shownFile(v.EffectID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	return os.WriteFile(f, []byte(v.Rev), 0o600)
}

func shownRev(effectID string) (string, error) {
	f, err := shownFile(effectID)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// stamp is a time in the text output's columns: UTC, always three
// fraction digits (the records keep milliseconds), so a column's times
// line up and read alike (RED_TEAM 324).
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func nextAttempt(v ledger.EffectView) string {
	switch {
	case !v.NextAttemptAt.IsZero():
		return stamp(v.NextAttemptAt)
	case v.Exhausted:
		return "none (retries exhausted)"
	case v.State == ledger.EffectEscaped || v.State == ledger.EffectPending:
		return "any time (the next try of its run, while the run is live)"
	}
	return "-"
}

func printView(w io.Writer, v ledger.EffectView) {
	fmt.Fprintf(w, "effect:        %s\n", v.EffectID)
	fmt.Fprintf(w, "state:         %s\n", v.State)
	fmt.Fprintf(w, "attempt:       %d of %d\n", v.Attempt, v.MaxAttempts)
	fmt.Fprintf(w, "next attempt:  %s\n", nextAttempt(v))
	if !v.Deadline.IsZero() {
		fmt.Fprintf(w, "budget ends:   %s\n", stamp(v.Deadline))
	}
	fmt.Fprintf(w, "provider key:  %s\n", v.ProviderKey)
	fmt.Fprintf(w, "keying:        %s\n", v.Keying)
	fmt.Fprintf(w, "run:           %s\n", dash(v.RunID))
	if o := v.Outcome; o != nil {
		if o.OK {
			fmt.Fprintln(w, "outcome:       success")
		} else {
			fmt.Fprintf(w, "outcome:       failure: %s\n", o.Error)
		}
	}
	fmt.Fprintf(w, "rev:           %s\n", v.Rev)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nATTEMPT\tSTATE\tFIRED AT\tENDED AT\tBY")
	for _, a := range v.Attempts {
		by := a.NodeID
		if a.Operator != "" {
			by = "operator " + a.Operator
			if a.Note != "" {
				by += ": " + a.Note
			}
		}
		ended := "-"
		if a.State != ledger.AttemptClaimed {
			ended = stamp(a.At)
		}
		fired := "-"
		if a.Fired {
			fired = stamp(a.FiredAt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", a.N, a.State, fired, ended, dash(by))
	}
	_ = tw.Flush()
}

type attemptJSON struct {
	Attempt  int    `json:"attempt"`
	State    string `json:"state"`
	FiredAt  string `json:"firedAt,omitempty"`
	EndedAt  string `json:"endedAt,omitempty"`
	NodeID   string `json:"nodeId,omitempty"`
	RunID    string `json:"runId,omitempty"`
	Operator string `json:"operator,omitempty"`
	Note     string `json:"note,omitempty"`
}

type viewJSONT struct {
	EffectID      string        `json:"effectId"`
	State         string        `json:"state"`
	Attempt       int           `json:"attempt"`
	MaxAttempts   int           `json:"maxAttempts"`
	NextAttemptAt string        `json:"nextAttemptAt,omitempty"`
	BudgetEndsAt  string        `json:"budgetEndsAt,omitempty"`
	Exhausted     bool          `json:"exhausted"`
	ProviderKey   string        `json:"providerKey"`
	Keying        string        `json:"keying"`
	RunID         string        `json:"runId,omitempty"`
	Outcome       *outcomeJSON  `json:"outcome,omitempty"`
	Rev           string        `json:"rev"`
	Attempts      []attemptJSON `json:"attempts"`
}

// outcomeJSON is a recorded outcome as show prints it: a success, or a
// failure and its message.
type outcomeJSON struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// opt is a time in the --json output: as stamp writes it (UTC, three
// fraction digits; the ledger keeps milliseconds), so a script comparing
// or sorting the strings orders them as the times (RED_TEAM 441); "" for
// none, which omitempty leaves out.
func opt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return stamp(t)
}

func viewJSON(v ledger.EffectView) viewJSONT {
	out := viewJSONT{EffectID: v.EffectID, State: string(v.State), Attempt: v.Attempt, MaxAttempts: v.MaxAttempts,
		NextAttemptAt: opt(v.NextAttemptAt), BudgetEndsAt: opt(v.Deadline), Exhausted: v.Exhausted,
		ProviderKey: v.ProviderKey, Keying: string(v.Keying), RunID: v.RunID, Rev: v.Rev, Attempts: []attemptJSON{}}
	if o := v.Outcome; o != nil {
		out.Outcome = &outcomeJSON{OK: o.OK, Error: o.Error}
	}
	for _, a := range v.Attempts {
		aj := attemptJSON{Attempt: a.N, State: string(a.State), NodeID: a.NodeID, RunID: a.RunID, Operator: a.Operator, Note: a.Note}
		if a.Fired {
			aj.FiredAt = opt(a.FiredAt)
		}
		if a.State != ledger.AttemptClaimed {
			aj.EndedAt = opt(a.At)
		}
		out.Attempts = append(out.Attempts, aj)
	}
	return out
}

func viewsJSON(vs []ledger.EffectView) []viewJSONT {
	out := make([]viewJSONT, 0, len(vs))
	for _, v := range vs {
		out = append(out, viewJSON(v))
	}
	return out
}

func printJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "idemkit effects: %v\n", err)
		return 1
	}
	return 0
}

// effectsCommands are the commands of `idemkit effects`.
var effectsCommands = commandList{
	group: "effects",
	about: "Settle effects that escaped: an attempt passed its point of no return (the\n" +
		"request may have reached the provider) and nobody recorded what happened.",
	entries: []entry{
		{"list --state escaped [--run ID]", "list effects (by state, by run)", runEffectsList},
		{"show EFFECT", "show an effect and all its attempts", runEffectsShow},
		{"resolve EFFECT --as delivered|not-delivered", "record what an operator found out", runEffectsResolve},
	},
	examples: []string{
		"idemkit effects list --state escaped --endpoint http://127.0.0.1:8000",
		"idemkit effects show EFFECT --endpoint http://127.0.0.1:8000",
		"idemkit effects resolve EFFECT --as not-delivered --note \"no charge in the console\"",
	},
}

// notEscapedAdvice says, for an effect a resolution was refused for (it is
// not escaped), its state and what the operator does instead.
func notEscapedAdvice(v ledger.EffectView) string {
	switch v.State {
	case ledger.EffectCompleted:
		return "it is completed: its outcome is recorded, there is nothing to resolve"
	case ledger.EffectFailed:
		return "it failed: its failure is recorded, there is nothing to resolve (a delivery that should happen again is a new effect)"
	case ledger.EffectInFlight:
		return "it is in-flight: an attempt holds its lease and may still record its outcome; show it again once that lease has ended, and resolve it if it is escaped then"
	case ledger.EffectPending:
		if v.Exhausted {
			return "it is pending and its tries are spent, none of them past the point of no return unrecorded: --as not-delivered grants it one more attempt"
		}
		return "it is pending: no attempt of it is in flight or escaped, and its run's next try fires it; there is nothing to resolve"
	}
	return fmt.Sprintf("it is %s; show it again, and resolve it if it is escaped then", v.State)
}

// passedBy says which token passed an effect's fence, from the fence's
// refusal to reopen it for the escaped attempt's.
func passedBy(err error) string {
	var ie *fence.IssuedError
	if !errors.As(err, &ie) || ie.Token == 0 {
		return "another attempt's token passed the fence"
	}
	s := fmt.Sprintf("another attempt's token passed the fence (token %d", ie.Token)
	if ie.Region != "" {
		s += " in " + ie.Region
	}
	if !ie.At.IsZero() {
		s += " at " + stamp(ie.At)
	}
	return s + ")"
}

// resolveAgain is the command that records a not-delivered resolution a
// failed write left unrecorded.
// mayHaveWritten reports whether err is the failure of a DynamoDB write
// one of whose tries got no answer before (awserr.MarkUnanswered, on
// every client of the CLI): that try may have been applied.
func mayHaveWritten(err error) bool {
	var oe *smithy.OperationError
	return errors.As(err, new(*awserr.UnansweredError)) && errors.As(err, &oe) && writeOperation(oe.OperationName) &&
		!errors.Is(err, context.Canceled)
}

// resolvedState is what the show says of an effect a resolution as settle
// recorded.
func resolvedState(settle ledger.Settlement) string {
	if settle == ledger.Delivered {
		return "completed"
	}
	return "released or pending"
}

func resolveAgain(effectID string) string {
	return "idemkit effects resolve " + effectID + " --as not-delivered"
}

// fenceCause is the store error under a resolution's error, for its user:
// the DynamoDB call and its cause, without the packages' prefixes.
func fenceCause(err error) string {
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		return storeError(oe)
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		if !errors.Is(e, ledger.ErrFenceReopenUnknown) && !errors.Is(e, ledger.ErrFenceReopened) {
			return unlabelled(e.Error())
		}
	}
	return "no answer"
}

// reopenUnknown says what a not-delivered resolution whose reopen of the
// fence failed unrefused left (ledger.ErrFenceReopenUnknown): the fence,
// read back, holds no pass (the reopen landed, its answer lost) or still
// holds one (it did not); unread, it may have been reopened. Either way
// nothing was recorded, and the same command records it (RED_TEAM 332).
func reopenUnknown(ctx context.Context, fs *fencedynamo.Store, effectID string, err error) string {
	cause := fenceCause(err)
	if fs == nil {
		return fmt.Sprintf("the fence of effect %s may have been reopened for the escaped attempt (%s), and the resolution was not recorded: "+
			"show it (idemkit effects show %s), and while it is still escaped, run the same command again, which records it: %s",
			effectID, cause, effectID, resolveAgain(effectID))
	}
	it, gerr := fs.Get(ctx, effectID)
	switch {
	case gerr != nil:
		return fmt.Sprintf("the fence of effect %s may have been reopened for the escaped attempt: the answer to that write was lost (%s), "+
			"and reading the fence back failed too (%s); the resolution was not recorded: show it (idemkit effects show %s), and while it is still escaped "+
			"at the rev you decided on, run the same command again, which records it whether or not the fence was reopened: %s",
			effectID, cause, fenceCause(gerr), effectID, resolveAgain(effectID))
	case it == nil || it.Passed == nil:
		return fmt.Sprintf("the fence of effect %s was reopened for the escaped attempt (read back: it holds no pass), but the answer to that write was lost (%s), "+
			"so the resolution was not recorded and the effect is still escaped: run the same command again, which records it: %s",
			effectID, cause, resolveAgain(effectID))
	}
	return fmt.Sprintf("the fence of effect %s was not reopened: the write failed (%s) and the fence still holds the pass of token %d; "+
		"nothing was recorded: run the same command again once the fence table answers: %s", effectID, cause, it.Passed.Token, resolveAgain(effectID))
}
