package settings

import (
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/idemenv"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/ledger"
)

// Setting is one configuration variable of the reference host. Settings is
// the one table of them and the one place a setting's default and range
// are stated: LoadEnv starts from the defaults (defaults) and refuses a
// value outside the range, `idemkit dev` derives its setting flags, their
// help and its own defaults from it (Flag, Usage, DevDefaults), and tests
// hold docs/CONFIGURATION.md's configuration table and every function's Environment in
// template.yaml to it (TestSettingDefaultsAndRangesStatedOnce ties the
// stated defaults and ranges to what LoadEnv does). A new setting is one
// entry here (plus its Env field and a test).
type Setting struct {
	// Name is the environment variable.
	Name string
	// Default is the value an unset variable has, written as the variable
	// would be ("300", "true", "single-region"): LoadEnv starts from it and
	// docs/CONFIGURATION.md shows it. "" when unset is no value (DefaultDoc says what).
	Default string
	// DefaultDoc, if set, is docs/CONFIGURATION.md's default cell instead of Default
	// (Markdown: "the function's region").
	DefaultDoc string
	// Min and Max are the range of a whole-number setting (Max > 0; Max
	// unbounded prints as "≥ Min"): LoadEnv refuses a value outside it.
	Min, Max int
	// Note is added to docs/CONFIGURATION.md's default cell ("template: 60").
	Note string
	// Dev is `idemkit dev`'s own default, beneath the environment ("":
	// Default).
	Dev string
	// Doc is the meaning (Markdown, one line). docs/CONFIGURATION.md's configuration
	// table is rendered from Settings (TestReadmeSettingsTable;
	// go test ./functions/host/settings -run TestReadmeSettingsTable -update-readme
	// rewrites it).
	Doc string
	// Functions are the template.yaml functions whose Environment sets the
	// variable ("Api" for ApiFunction, ...). Tests check both ways.
	Functions []string
	// Flag is the `idemkit dev` flag that overrides the variable ("" none);
	// BoolFlag makes it a flag without a value (present: "true").
	Flag     string
	BoolFlag bool
	// FlagUsage is the flag's help text; Usage adds the default.
	FlagUsage string
	// Layer1 marks a variable read by idemenv.Load into Env.Idem (library
	// users read it the same way); set is nil for those, and their Default,
	// Min and Max state idem's (the test holds them to idemenv.Load).
	Layer1 bool
	// Unit is what a whole-number entry counts ("whole seconds"), for the
	// error naming its range.
	Unit string
	// num assigns a whole-number entry's value, once parse has checked it
	// is within Min..Max; set parses any other non-empty, trimmed value
	// into e, its error saying what is wanted ("want ..."). Both are nil
	// for Layer 1's entries.
	num func(e *Env, n int)
	set func(e *Env, v string) error
}

// unbounded is the Max of a whole-number setting with no upper bound.
const unbounded = 1<<31 - 1

// unitDays is the Unit of a setting counting days into a time.Duration
// (EFFECT_RETENTION_DAYS, RUN_RETENTION_DAYS). LoadEnv refuses a count
// above maxDurationDays (106751, about 292 years) rather than let it wrap
// to a negative duration (read as "keep forever") or a short one.
const unitDays = "whole days"

// maxDurationDays is the largest whole number of days a time.Duration
// holds.
const maxDurationDays = int(math.MaxInt64 / int64(24*time.Hour))

// Settings lists every variable LoadEnv reads, in docs/CONFIGURATION.md's order.
var Settings = []Setting{
	{Name: idemenv.Table, DefaultDoc: "—", Doc: "Layer-1 table (the auditor writes a Layer-1 conflict's winner back into it under `reconciled-records`; the sweeper deletes its expired records in a `fenced-effects` home stack, where it has no TTL)", Functions: []string{"Api", "Auditor", "Sweeper"}, Layer1: true},
	{Name: idemenv.Policy, Default: "openwop", Doc: "the idempotency policy: " + policyChoices("`", " \\| ") + " ([choosing it](POLICIES.md#choosing-the-idempotency-policy)); advertised in `GET /.well-known/openwop` as `extensions[\"idemkit.idempotency\"].policy` (`idemkit dev --policy`)", Functions: []string{"Api", "Executor", "Sweeper"}, Layer1: true,
		Flag: "policy", FlagUsage: "the idempotency policy `NAME`: " + orList(idem.PolicyNames()) + " (overrides IDEMPOTENCY_POLICY)"},
	{Name: idemenv.Enabled, Default: "true", Doc: "Layer 1 on (off: handlers run directly, no headers; the same `Idempotency-Key` twice then does the work twice, so `GET /.well-known/openwop` advertises no `idempotency` family and no `extensions[\"idemkit.idempotency\"]`, and `GET /runs/{runId}/effects`, gated on that family, is `404 not_found`)", Layer1: true},
	{Name: idemenv.Required, Default: "false", Doc: "a missing key on a mutating route is `400 idempotency_key_invalid`, `details.reason = \"missing\"` (the registry has no \"missing key\" code)", Layer1: true},
	{Name: idemenv.LeaseSeconds, Default: seconds(idem.DefaultLease), Min: int(idem.MinLease / time.Second), Max: int(idem.MaxLease / time.Second), Doc: "Layer-1 lease, renewed by a heartbeat; inside Lambda capped by the remaining time + 10 s (no heartbeat needed when the cap applies)", Functions: []string{"Api"}, Layer1: true},
	{Name: idemenv.RetentionHours, DefaultDoc: "the policy's: `24` (OpenWOP), `720` (ERP), forever (commerce)", Doc: "record retention; `0`/`forever` = never expire; OpenWOP rejects a finite value below 24", Functions: []string{"Api", "Executor", "Sweeper"}, Layer1: true},
	{Name: idemenv.StoreTimeoutMS, Default: strconv.Itoa(int(idem.DefaultStoreTimeout / time.Millisecond)), Min: 100, Max: 60000, Note: "template: 3000", Functions: []string{"Api"}, Doc: "milliseconds each Layer-1 store call of a request may take (claim, polls, renewals, completion), also bounded by the request's deadline less 250 ms and the lease; a store that does not answer in time is `503 idemkit.store_unavailable` with `Retry-After` ([the budget](#the-request-budget-behind-an-http-api))", Layer1: true},
	{Name: idemenv.WaitMS, Default: strconv.Itoa(int(idem.DefaultWait / time.Millisecond)), Min: 0, Max: 60000, Doc: "milliseconds a duplicate of an in-flight request waits for its outcome before `409 idempotency_in_flight` with `Retry-After` (`0`: answer at once), also bounded by the request's deadline less 250 ms (`idemkit dev --idempotency-wait`)", Layer1: true},
	{Name: idemenv.DerivedKeys, Default: "false", Doc: "the derived-key mode: routes whose key is derived from the request (`idem.Route.DeriveKey`) are allowed under the chosen policy, its other rules unchanged ([a key derived from the request](POLICIES.md#a-key-derived-from-the-request))", Layer1: true},
	{Name: idemenv.KeyHashSecret, DefaultDoc: "unset: a random salt per process", Doc: "secret keying the hashes (`kh:…`) that stand for idempotency keys in Layer 1's logs: the same secret on every instance hashes one key alike, so a failing key or SQS message can be followed across instances; the auditor keys with it the hashes that stand for a conflict event's record, effect and owners (and its own lines' record and effect), so one record's events match in every region's stack given the same secret (template: `KeyHashSecret`, NoEcho)", Functions: []string{"Api", "Auditor"}, Layer1: true},
	{Name: EnvRunsTable, DefaultDoc: "—", Doc: "runs table", Functions: []string{"Api", "Executor"}, set: str(func(e *Env) *string { return &e.RunsTable })},
	{Name: EnvEffectsTable, DefaultDoc: "—", Doc: "effects table (the Layer-2 ledger; the auditor writes a completed effect record back into it under `reconciled-records` where the other region's claim replaced it without an outcome; the sweeper deletes its expired records under `EffectsConsistency=STRONG` and in a `fenced-effects` home stack, where it has no TTL)", Functions: []string{"Api", "Auditor", "Executor", "Sweeper"}, set: str(func(e *Env) *string { return &e.EffectsTable })},
	{Name: EnvAPIKeysTable, DefaultDoc: "—", Doc: "API keys table (the authorizer's; the executor reads the tenants' webhook signing secrets from it, and a delivery is unsigned without it)", Functions: []string{"Authorizer", "Executor"}, set: str(func(e *Env) *string { return &e.APIKeysTable })},
	{Name: EnvFenceTable, DefaultDoc: "—", Doc: "fence table (`fenced-effects`)", Functions: []string{"Api", "Executor"}, set: str(func(e *Env) *string { return &e.FenceTable })},
	{Name: EnvEffectLease, Default: seconds(ledger.DefaultLease), Min: 1, Max: 3600, Note: "template: 60", Dev: "30", Doc: "ledger claim lease (renewed by heartbeat every lease/3)", Functions: []string{"Api", "Executor"},
		Unit: "whole seconds", num: func(e *Env, n int) { e.EffectLease = time.Duration(n) * time.Second }},
	{Name: envEffectRetention, Default: strconv.Itoa(int(ledger.MinRetention / (24 * time.Hour))), Min: int(ledger.MinRetention / (24 * time.Hour)), Max: unbounded, Doc: "ledger retention", Functions: []string{"Api", "Executor"},
		Unit: unitDays, num: func(e *Env, n int) { e.EffectRetention = time.Duration(n) * 24 * time.Hour }},
	{Name: EnvRunRetention, Default: "0", Min: 0, Max: unbounded, Doc: "days an ended run (completed, failed, cancelled) is kept after its end; RunsTable's TTL (`expiresAt`, stamped in the write that ends the run) then deletes it and `GET /runs/{runId}` is `404 not_found` (the error registry's code for a missing run). `0` = forever. A finite value below `EFFECT_RETENTION_DAYS` or the Layer-1 retention (when finite) is raised to the longer of them, in whole days, with a configuration warning; one without `RUNS_TRANSACTIONAL` in effect is refused at start-up ([what is kept how long](DEPLOYING.md#what-is-kept-and-for-how-long))", Functions: []string{"Api", "Executor"},
		Unit: unitDays, num: func(e *Env, n int) { e.RunRetention = time.Duration(n) * 24 * time.Hour }},
	{Name: EnvCrossRegion, Default: CrossRegionSingle, Doc: "`single-region` \\| `reconciled-records` \\| `fenced-effects` (advertised in `GET /.well-known/openwop`)", Functions: []string{"Api", "Executor", "Auditor"}, set: func(e *Env, v string) error {
		e.CrossRegion = v
		if !validCrossRegion(v) {
			return errors.New("want single-region, reconciled-records or fenced-effects")
		}
		return nil
	}},
	{Name: envWebhookAllowlist, DefaultDoc: "empty (any public host)", Doc: "comma-separated hosts / `*.domain` for the webhook workflow", Functions: []string{"Api", "Executor"}, set: func(e *Env, v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				a, err := allowlistEntry(h)
				if err != nil {
					// Kept as written, matching no destination as
					// before: dropped, it could leave the list empty,
					// which admits any public host (RED_TEAM 374).
					e.Warnings = append(e.Warnings, fmt.Sprintf("%s: %v; it matches no destination, so the webhook workflow is refused every host but the list's other entries", envWebhookAllowlist, err))
					a = strings.ToLower(h)
				}
				e.Webhook.Allow = append(e.Webhook.Allow, a)
			}
		}
		return nil
	}},
	{Name: EnvWebhookLoopback, Default: "false", Doc: "admit loopback webhook destinations (`idemkit dev --allow-loopback-webhooks`)", set: boolean(func(e *Env) *bool { return &e.Webhook.AllowLoopback }),
		Flag: "allow-loopback-webhooks", BoolFlag: true, FlagUsage: "let the webhook workflow call loopback addresses (127.0.0.1, ::1, localhost)"},
	{Name: envWebhookPrivate, Default: "false", Doc: "admit RFC 1918 webhook destinations", set: boolean(func(e *Env) *bool { return &e.Webhook.AllowPrivate })},
	{Name: envWebhookMaxTries, Default: strconv.Itoa(webhook.DefaultMaxTries), Min: 1, Max: ledger.MaxMaxAttempts, Doc: "the webhook workflow's attempt cap per delivery",
		Unit: "a whole number", num: func(e *Env, n int) { e.WebhookMaxTries = n }},
	{Name: envWebhookBudget, Default: seconds(webhook.DefaultBudget), Min: 60, Max: 604800, Doc: "the webhook workflow's retry time budget: no try starts later than this after the first",
		Unit: "whole seconds", num: func(e *Env, n int) { e.WebhookBudget = time.Duration(n) * time.Second }},
	{Name: EnvFenceTableRegion, DefaultDoc: "required under `fenced-effects`", Dev: "us-east-1", Doc: "home region of the fence table (replica-region stacks call it there; the home stack names its own region)", Functions: []string{"Api", "Executor"},
		set: region(func(e *Env) *string { return &e.FenceTableRegion })},
	{Name: EnvIdempotencyTableRegion, DefaultDoc: "`FENCE_TABLE_REGION` under `fenced-effects`, else unset", Doc: "home region whose idempotency-table replica decides every Layer-1 record (`fenced-effects` only)", Functions: []string{"Api"},
		set: region(func(e *Env) *string { return &e.IdempotencyTableRegion })},
	{Name: EnvRunsTableRegion, DefaultDoc: "unset: the local table", Doc: "home region whose `RUNS_TABLE` holds every run (`fenced-effects` replica stacks' api only: a run is read in every region at once)", Functions: []string{"Api"},
		set: region(func(e *Env) *string { return &e.RunsTableRegion })},
	{Name: EnvHomeFenceTableARN, DefaultDoc: "unset: nothing is read", Doc: "replica-region stacks only: the ARN of the home stack's fence table (`FENCE_TABLE` in `FENCE_TABLE_REGION`), whose `idemkit:cross-region` tag holds the home stack's `CrossRegion`; it is read at every cold start, and a function whose `CROSS_REGION` differs stops there. A tag missing (a home stack deployed before the tag) or unreadable is a configuration warning", Functions: []string{"Api", "Executor"},
		set: func(e *Env, v string) error {
			e.HomeFenceTableARN = v
			if !tableARNRE.MatchString(v) {
				return errors.New("want a DynamoDB table's ARN such as arn:aws:dynamodb:eu-west-1:123456789012:table/NAME")
			}
			return nil
		}},
	{Name: EnvReplicationLagBound, Default: strconv.Itoa(DefaultReplicationLagBoundMs), Min: 0, Max: maxReplicationLagBoundMs, Doc: "advertised as `multiRegion.replicationLagBoundMs` under `fenced-effects`", Functions: []string{"Api"},
		Unit: "whole milliseconds", num: func(e *Env, n int) { e.ReplicationLagBoundMs = n }},
	{Name: EnvStreamMaxRetries, Default: "10", Min: 0, Max: 100, Dev: "5", Doc: "stream retries before the on-failure queue; the last try marks the run `failed` (`failures`, `lastError` on the run). At most 100: each failed try adds its message (at most 512 bytes) to the run's item, and the largest run with 101 of them and its end stays within DynamoDB's 400 KB item limit. `idemkit dev` counts only the failures it could record on the run, and retries for `STREAM_RETRY_SECONDS` whatever the count", Functions: []string{"Executor"},
		Unit: "a whole number", num: func(e *Env, n int) { e.StreamMaxRetries = n }},
	{Name: EnvStreamRetry, Default: "900", Min: 1, Max: 86400, Doc: "how long `idemkit dev`'s stream pollers retry a failing record, with backoff, before dropping it (the stale-run pass still drives its run)",
		Unit: "whole seconds", num: func(e *Env, n int) { e.StreamRetry = time.Duration(n) * time.Second }},
	{Name: EnvRunStale, Default: "900", Min: 1, Max: 86400, Dev: "60", Doc: "a pending or running run without progress this long is claimed and driven by the executor's stale-run pass (every minute); an executor driving a run renews its claim every third of this, so a slow node is never overtaken while its executor lives; a run paused (`drain-current-node`) while a node executed, whose execution then stopped renewing this long, gets its held `run.paused` recorded by the same pass and stays paused", Functions: []string{"Executor"},
		Unit: "whole seconds", num: func(e *Env, n int) { e.RunStale = time.Duration(n) * time.Second }},
	{Name: EnvPollMaxWait, Default: "20", Min: 1, Max: 60, Doc: "the longest a long poll of `GET /runs/{runId}/events/poll` waits for an event, whatever its `timeout` asks; the invocation's deadline less 2 s bounds it too (behind an HTTP API, whose api function's `Timeout` is 29 s, the default fits). Each waiting poll holds one api function instance for its wait and re-reads the run with a backoff: 14 reads at most for 20 s",
		Unit: "whole seconds", num: func(e *Env, n int) { e.PollMaxWait = time.Duration(n) * time.Second }},
	{Name: envTransactional, Default: "true", Doc: "createRun writes the run in the Layer-1 completion transaction; a retry sent without an `Idempotency-Key` writes its run and its listing on the failed run in one transaction of their own", set: boolean(func(e *Env) *bool { return &e.Transactional })},
	{Name: EnvDynamoDBEndpoint, DefaultDoc: "AWS", Doc: "endpoint override (LocalStack, DynamoDB Local, emulators; `idemkit dev`: stands for `--dynamodb-endpoint` unless `--emulator` is given, which starts an engine of its own)", set: str(func(e *Env) *string { return &e.DynamoDBEndpoint })},
	{Name: envMetricsNS, Default: "idemkit", Note: "template: `idemkit/STACK`", Doc: "EMF namespace: the template gives every function the stack's own, the only one its alarms and dashboard read, so two stacks in one account and region count nothing of each other's ([DEPLOYING.md](DEPLOYING.md#the-reference-stack-what-pages-you-and-what-to-do))", Functions: []string{"Api", "Auditor", "Authorizer", "Executor", "Sweeper"}, set: str(func(e *Env) *string { return &e.MetricsNamespace })},
}

// defaults is Env before any variable is read: every entry's Default,
// parsed as LoadEnv parses a value (Layer 1's are idemenv.Load's).
func defaults() Env {
	e := Env{Idem: idemenv.Env{Enabled: true}}
	for _, s := range Settings {
		if s.parses() && s.Default != "" {
			if err := s.parse(&e, s.Default); err != nil {
				panic(fmt.Sprintf("settings: %s: Default %q: %v", s.Name, s.Default, err))
			}
		}
	}
	return e
}

// DevDefaults are `idemkit dev`'s own defaults, beneath the environment:
// every entry's Dev, by variable.
func DevDefaults() map[string]string {
	m := map[string]string{}
	for _, s := range Settings {
		if s.Dev != "" {
			m[s.Name] = s.Dev
		}
	}
	return m
}

// Usage is the `idemkit dev` flag's help: FlagUsage and the default the
// flag overrides (under `idemkit dev`, Dev before Default).
func (s Setting) Usage() string {
	d := s.Dev
	if d == "" {
		d = s.Default
	}
	if d == "" || s.BoolFlag && d == "false" {
		return s.FlagUsage
	}
	return s.FlagUsage + " (default " + d + ")"
}

// defaultCell is docs/CONFIGURATION.md's default cell: the default, the range, the
// note and `idemkit dev`'s own default.
func (s Setting) defaultCell() string {
	d := s.DefaultDoc
	if d == "" {
		d = "`" + s.Default + "`"
	}
	var more []string
	switch {
	case s.Max == unbounded:
		more = append(more, fmt.Sprintf("≥ %d", s.Min))
	case s.Max > 0:
		more = append(more, fmt.Sprintf("%d..%d", s.Min, s.Max))
	}
	if s.Note != "" {
		more = append(more, s.Note)
	}
	if s.Dev != "" {
		more = append(more, "`idemkit dev`: "+s.Dev)
	}
	if len(more) > 0 {
		d += " (" + strings.Join(more, "; ") + ")"
	}
	return d
}

// seconds writes d as whole seconds.
func seconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// LoadEnv reads Env through getenv (os.Getenv in Lambda; Layered for
// overrides on top of it): the Layer-1 variables through idemenv.Load, then
// every other entry of Settings, then the checks between settings. It
// reports every bad value at once, each naming its variable, in one error
// that matches ErrConfig; Layer 1's *idem.ConfigError is wrapped, so
// errors.Is(err, idem.ErrConfig) holds too.
func LoadEnv(getenv func(string) string) (Env, error) {
	e := defaults()
	var p configerr.List
	ie, err := idemenv.Load(getenv)
	p.Wrap(err)
	e.Idem = ie
	for _, s := range Settings {
		if !s.parses() {
			continue
		}
		if v := strings.TrimSpace(getenv(s.Name)); v != "" {
			if err := s.parse(&e, v); err != nil {
				p.Addf("%s=%q: %v", s.Name, v, err)
			}
		}
	}
	for _, b := range e.between() {
		p.Addf("%s", b)
	}
	return e, p.Err("host: invalid environment", ErrConfig)
}

// ErrConfig is matched (errors.Is) by every error LoadEnv and Env.Require
// return.
var ErrConfig = errors.New("host: invalid environment")

// between checks the settings that depend on one another and fills
// IdempotencyTableRegion's default.
func (e *Env) between() []string {
	var p []string
	e.raiseRunRetention()
	if e.CrossRegion == CrossRegionFenced && e.FenceTable == "" {
		p = append(p, fmt.Sprintf("%s=fenced-effects needs %s", EnvCrossRegion, EnvFenceTable))
	}
	if e.CrossRegion == CrossRegionFenced && e.FenceTableRegion == "" {
		// Named explicitly, the home region's own stack included: a
		// stack that took its own region for the home would be a second
		// home, fencing each effect once per region (RED_TEAM 509).
		p = append(p, fmt.Sprintf("%s=fenced-effects needs %s (the home region, whose fence table every region's functions use; the home region's own stack names itself)", EnvCrossRegion, EnvFenceTableRegion))
	}
	switch {
	case e.IdempotencyTableRegion == "" && e.CrossRegion == CrossRegionFenced:
		e.IdempotencyTableRegion = e.FenceTableRegion
	case e.IdempotencyTableRegion == "" || !validRegion(e.IdempotencyTableRegion):
		// unset, or already reported as malformed
	case e.CrossRegion != CrossRegionFenced:
		p = append(p, fmt.Sprintf("%s is used only with %s=fenced-effects (other postures keep Layer 1 on the local replica)", EnvIdempotencyTableRegion, EnvCrossRegion))
	case e.FenceTableRegion != "" && e.IdempotencyTableRegion != e.FenceTableRegion:
		p = append(p, fmt.Sprintf("%s=%q and %s=%q: fenced-effects has ONE home region", EnvIdempotencyTableRegion, e.IdempotencyTableRegion, EnvFenceTableRegion, e.FenceTableRegion))
	}
	if m := tableARNRE.FindStringSubmatch(e.HomeFenceTableARN); m != nil {
		if m[1] != e.FenceTableRegion {
			p = append(p, fmt.Sprintf("%s=%q is in %q, and %s=%q: the home stack's fence table is the one every region calls", EnvHomeFenceTableARN, e.HomeFenceTableARN, m[1], EnvFenceTableRegion, e.FenceTableRegion))
		}
		if m[2] != e.FenceTable {
			p = append(p, fmt.Sprintf("%s=%q names table %q, and %s=%q: the home stack's fence table is the one every region calls", EnvHomeFenceTableARN, e.HomeFenceTableARN, m[2], EnvFenceTable, e.FenceTable))
		}
	}
	switch {
	case e.RunsTableRegion == "" || !validRegion(e.RunsTableRegion):
		// unset, or already reported as malformed
	case e.CrossRegion != CrossRegionFenced:
		p = append(p, fmt.Sprintf("%s is used only with %s=fenced-effects (other postures keep runs in the local table)", EnvRunsTableRegion, EnvCrossRegion))
	case e.FenceTableRegion != "" && e.RunsTableRegion != e.FenceTableRegion:
		p = append(p, fmt.Sprintf("%s=%q and %s=%q: fenced-effects has ONE home region", EnvRunsTableRegion, e.RunsTableRegion, EnvFenceTableRegion, e.FenceTableRegion))
	case e.IdempotencyTableRegion != "" && e.RunsTableRegion != e.IdempotencyTableRegion:
		p = append(p, fmt.Sprintf("%s=%q and %s=%q: fenced-effects has ONE home region", EnvRunsTableRegion, e.RunsTableRegion, EnvIdempotencyTableRegion, e.IdempotencyTableRegion))
	}
	return p
}

// Layered returns a getenv that answers, for each name, the first non-empty
// value among layers (earlier layers override later ones): `idemkit dev`
// reads Layered(its own values, its flags, os.Getenv, its defaults).
func Layered(layers ...func(string) string) func(string) string {
	return func(name string) string {
		for _, l := range layers {
			if l == nil {
				continue
			}
			if v := l(name); strings.TrimSpace(v) != "" {
				return v
			}
		}
		return ""
	}
}

// Values is a getenv over a map.
func Values(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

func str(field func(*Env) *string) func(*Env, string) error {
	return func(e *Env, v string) error { *field(e) = v; return nil }
}

func boolean(field func(*Env) *bool) func(*Env, string) error {
	return func(e *Env, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		*field(e) = b
		return nil
	}
}

// parses reports whether LoadEnv parses the variable itself (every entry
// but Layer 1's).
func (s Setting) parses() bool { return s.set != nil || s.num != nil }

// parse parses a non-empty, trimmed value into e: a whole-number entry
// within Min..Max, any other through set.
func (s Setting) parse(e *Env, v string) error {
	if s.num == nil {
		return s.set(e, v)
	}
	n, err := strconv.Atoi(v)
	// A count of days above what a duration holds is refused naming that
	// largest, also one beyond what an int holds (RED_TEAM 433): the
	// "at least" below would tell it to be what it is.
	tooLarge := errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-")
	if s.Unit == unitDays && (tooLarge || err == nil && n > maxDurationDays) {
		return fmt.Errorf("want %s, at most %d (the longest a duration holds, about 292 years)", s.Unit, maxDurationDays)
	}
	if err != nil || n < s.Min || n > s.Max {
		if s.Max == unbounded {
			return fmt.Errorf("want %s, at least %d", s.Unit, s.Min)
		}
		return fmt.Errorf("want %s %d..%d", s.Unit, s.Min, s.Max)
	}
	s.num(e, n)
	return nil
}

func region(field func(*Env) *string) func(*Env, string) error {
	return func(e *Env, v string) error {
		*field(e) = v
		if !validRegion(v) {
			return errors.New("want an AWS region name such as eu-west-1")
		}
		return nil
	}
}

// settingsTable renders Settings as docs/CONFIGURATION.md's configuration table
// (Markdown: variable, default, meaning).
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, s := range Settings {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.defaultCell(), s.Doc)
	}
	return b.String()
}

// policyChoices renders the preset policy names (idem.PolicyNames), each
// between quote, joined by sep.
func policyChoices(quote, sep string) string {
	names := idem.PolicyNames()
	for i, n := range names {
		names[i] = quote + n + quote
	}
	return strings.Join(names, sep)
}

// orList renders names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// allowlistEntry checks one WEBHOOK_ALLOWLIST entry and returns it as the
// webhook policy compares it (lower case, an absolute host's trailing dot
// removed, as a destination's host is checked): a host name, "*." and a
// domain, or an IP address. Anything else (a URL, a port, a path, an IPv6
// address in brackets, another pattern) would match no destination, so
// every webhook run would be refused while the stack looked healthy: it is
// said as a warning instead (Env.Warnings; RED_TEAM 362, 490).
func allowlistEntry(h string) (string, error) {
	bad := fmt.Errorf("entry %q is not a host: want example.com, *.example.com or an IP address (no scheme, port, path or brackets)", h)
	a := strings.ToLower(h)
	if ip, err := netip.ParseAddr(a); err == nil && ip.Zone() == "" {
		return a, nil
	}
	a = strings.TrimSuffix(a, ".")
	name := strings.TrimPrefix(a, "*.")
	if name == "" || len(name) > 253 {
		return "", bad
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", bad
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", bad
			}
		}
	}
	return a, nil
}
