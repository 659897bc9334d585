package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/ledger"
)

// Setting is one configuration variable of the reference host. Settings is
// the one table of them: LoadEnv reads and validates every variable it
// lists, `idemkit dev` derives its setting flags from it (Flag), and tests
// hold README.md's configuration table and every function's Environment in
// template.yaml to it. A new setting is one entry here (plus its Env field
// and a test).
type Setting struct {
	// Name is the environment variable.
	Name string
	// Default is the documented default and Doc the meaning: README.md's
	// configuration table is rendered from them (TestReadmeSettingsTable;
	// go test ./functions/host/settings -run TestReadmeSettingsTable -update-readme
	// rewrites it).
	Default string
	// Doc is the meaning (Markdown, one line).
	Doc string
	// Functions are the template.yaml functions whose Environment sets the
	// variable ("Api" for ApiFunction, ...). Tests check both ways.
	Functions []string
	// Flag is the `idemkit dev` flag that overrides the variable ("" none);
	// BoolFlag makes it a flag without a value (present: "true").
	Flag     string
	BoolFlag bool
	// FlagUsage is the flag's help text.
	FlagUsage string
	// Layer1 marks a variable read by idem.LoadEnv into Env.Idem (library
	// users read it the same way); set is nil for those.
	Layer1 bool
	// set parses a non-empty, trimmed value into e; its error says what is
	// wanted ("want ...").
	set func(e *Env, v string) error
}

// Settings lists every variable LoadEnv reads, in README.md's order.
var Settings = []Setting{
	{Name: idem.EnvTable, Default: "—", Doc: "Layer-1 table", Functions: []string{"Api"}, Layer1: true},
	{Name: idem.EnvPolicy, Default: "`openwop`", Doc: "the idempotency policy: `openwop` \\| `commerce` \\| `erp` ([choosing it](#choosing-the-idempotency-policy)); advertised in `GET /.well-known/openwop` as `extensions[\"idemkit.idempotency\"].policy` (`idemkit dev --policy`)", Functions: []string{"Api"}, Layer1: true,
		Flag: "policy", FlagUsage: "the idempotency policy `NAME`: openwop, commerce or erp (overrides IDEMPOTENCY_POLICY)"},
	{Name: idem.EnvEnabled, Default: "`true`", Doc: "Layer 1 on (off: handlers run directly, no headers)", Layer1: true},
	{Name: idem.EnvRequired, Default: "`false`", Doc: "a missing key on a mutating route is `400 idempotency_key_invalid`, `details.reason = \"missing\"` (the registry has no \"missing key\" code)", Layer1: true},
	{Name: idem.EnvLeaseSeconds, Default: "`300` (30..3600)", Doc: "Layer-1 lease, renewed by a heartbeat; inside Lambda capped by the remaining time + 10 s (no heartbeat needed when the cap applies)", Functions: []string{"Api"}, Layer1: true},
	{Name: idem.EnvRetentionHours, Default: "the policy's: `24` (OpenWOP), `720` (ERP), forever (commerce)", Doc: "record retention; `0`/`forever` = never expire; OpenWOP rejects a finite value below 24", Functions: []string{"Api"}, Layer1: true},
	{Name: EnvRunsTable, Default: "—", Doc: "runs table", Functions: []string{"Api", "Executor"}, set: str(func(e *Env) *string { return &e.RunsTable })},
	{Name: EnvEffectsTable, Default: "—", Doc: "effects table (the Layer-2 ledger)", Functions: []string{"Api", "Executor", "Sweeper"}, set: str(func(e *Env) *string { return &e.EffectsTable })},
	{Name: EnvAPIKeysTable, Default: "—", Doc: "API keys table (the authorizer's)", Functions: []string{"Authorizer"}, set: str(func(e *Env) *string { return &e.APIKeysTable })},
	{Name: EnvFenceTable, Default: "—", Doc: "fence table (`fenced-effects`)", Functions: []string{"Api", "Executor"}, set: str(func(e *Env) *string { return &e.FenceTable })},
	{Name: EnvEffectLease, Default: "`300` (1..3600; template: 60)", Doc: "ledger claim lease (renewed by heartbeat every lease/3)", Functions: []string{"Api", "Executor"},
		set: whole(1, 3600, "whole seconds 1..3600", func(e *Env, n int) { e.EffectLease = time.Duration(n) * time.Second })},
	{Name: envEffectRetention, Default: "`14` (≥ 14)", Doc: "ledger retention", Functions: []string{"Api", "Executor"},
		set: whole(14, 1<<31-1, "whole days, at least 14", func(e *Env, n int) { e.EffectRetention = time.Duration(n) * 24 * time.Hour })},
	{Name: EnvCrossRegion, Default: "`single-region`", Doc: "`single-region` \\| `reconciled-records` \\| `fenced-effects` (advertised in `GET /.well-known/openwop`)", Functions: []string{"Api", "Executor", "Auditor"}, set: func(e *Env, v string) error {
		e.CrossRegion = v
		if !validCrossRegion(v) {
			return errors.New("want single-region, reconciled-records or fenced-effects")
		}
		return nil
	}},
	{Name: envWebhookAllowlist, Default: "empty (any public host)", Doc: "comma-separated hosts / `*.domain` for the webhook workflow", Functions: []string{"Api", "Executor"}, set: func(e *Env, v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				e.Webhook.Allow = append(e.Webhook.Allow, h)
			}
		}
		return nil
	}},
	{Name: EnvWebhookLoopback, Default: "`false`", Doc: "admit loopback webhook destinations (`idemkit dev --allow-loopback-webhooks`)", set: boolean(func(e *Env) *bool { return &e.Webhook.AllowLoopback }),
		Flag: "allow-loopback-webhooks", BoolFlag: true, FlagUsage: "let the webhook workflow call loopback addresses (127.0.0.1, ::1, localhost)"},
	{Name: envWebhookPrivate, Default: "`false`", Doc: "admit RFC 1918 webhook destinations", set: boolean(func(e *Env) *bool { return &e.Webhook.AllowPrivate })},
	{Name: envWebhookMaxTries, Default: "`20` (1..500)", Doc: "the webhook workflow's attempt cap per delivery",
		set: whole(1, ledger.MaxMaxAttempts, fmt.Sprintf("a whole number 1..%d", ledger.MaxMaxAttempts), func(e *Env, n int) { e.WebhookMaxTries = n })},
	{Name: envWebhookBudget, Default: "`3600` (60..604800)", Doc: "the webhook workflow's retry time budget: no try starts later than this after the first",
		set: whole(60, 604800, "whole seconds 60..604800", func(e *Env, n int) { e.WebhookBudget = time.Duration(n) * time.Second })},
	{Name: EnvFenceTableRegion, Default: "the function's region", Doc: "home region of the fence table (replica-region stacks call it there)", Functions: []string{"Api", "Executor"},
		set: region(func(e *Env) *string { return &e.FenceTableRegion })},
	{Name: EnvIdempotencyTableRegion, Default: "`FENCE_TABLE_REGION` under `fenced-effects`, else unset", Doc: "home region whose idempotency-table replica decides every Layer-1 record (`fenced-effects` only)", Functions: []string{"Api"},
		set: region(func(e *Env) *string { return &e.IdempotencyTableRegion })},
	{Name: EnvReplicationLagBound, Default: "`2000` (0..60000)", Doc: "advertised as `multiRegion.replicationLagBoundMs` under `fenced-effects`", Functions: []string{"Api"},
		set: whole(0, maxReplicationLagBoundMs, fmt.Sprintf("whole milliseconds 0..%d", maxReplicationLagBoundMs), func(e *Env, n int) { e.ReplicationLagBoundMs = n })},
	{Name: EnvStreamMaxRetries, Default: "`10` (0..10000; `idemkit dev`: 5)", Doc: "stream retries before the on-failure queue; the last try marks the run `failed` (`failures`, `lastError` on the run). `idemkit dev` counts only the failures it could record on the run, and retries for `STREAM_RETRY_SECONDS` whatever the count", Functions: []string{"Executor"},
		set: whole(0, 10000, "a whole number 0..10000", func(e *Env, n int) { e.StreamMaxRetries = n })},
	{Name: EnvStreamRetry, Default: "`900` (1..86400)", Doc: "how long `idemkit dev`'s stream pollers retry a failing record, with backoff, before dropping it (the stale-run pass still drives its run)",
		set: whole(1, 86400, "whole seconds 1..86400", func(e *Env, n int) { e.StreamRetry = time.Duration(n) * time.Second })},
	{Name: EnvRunStale, Default: "`900` (1..86400; `idemkit dev`: 60)", Doc: "a pending or running run without progress this long is claimed and driven by the executor's stale-run pass (every minute; must exceed the longest healthy execution)", Functions: []string{"Executor"},
		set: whole(1, 86400, "whole seconds 1..86400", func(e *Env, n int) { e.RunStale = time.Duration(n) * time.Second })},
	{Name: envTransactional, Default: "`true`", Doc: "createRun writes the run in the Layer-1 completion transaction", set: boolean(func(e *Env) *bool { return &e.Transactional })},
	{Name: EnvDynamoDBEndpoint, Default: "AWS", Doc: "endpoint override (LocalStack, DynamoDB Local, emulators; `idemkit dev`: `--dynamodb-endpoint`)", set: str(func(e *Env) *string { return &e.DynamoDBEndpoint })},
	{Name: envMetricsNS, Default: "`idemkit`", Doc: "EMF namespace", Functions: []string{"Auditor", "Sweeper"}, set: str(func(e *Env) *string { return &e.MetricsNamespace })},
}

// defaults is Env before any variable is read: every field's stated default.
func defaults() Env {
	return Env{
		Idem:                  idem.Env{Enabled: true},
		EffectLease:           ledger.DefaultLease,
		EffectRetention:       ledger.MinRetention,
		CrossRegion:           CrossRegionSingle,
		Transactional:         true,
		MetricsNamespace:      "idemkit",
		StreamMaxRetries:      10,
		StreamRetry:           15 * time.Minute,
		RunStale:              15 * time.Minute,
		ReplicationLagBoundMs: DefaultReplicationLagBoundMs,
	}
}

// LoadEnv reads Env through getenv (os.Getenv in Lambda; Layered for
// overrides on top of it): the Layer-1 variables through idem.LoadEnv, then
// every other entry of Settings, then the checks between settings. It
// reports every bad value at once, each naming its variable.
func LoadEnv(getenv func(string) string) (Env, error) {
	e := defaults()
	var p []string
	ie, err := idem.LoadEnv(getenv)
	if err != nil {
		p = append(p, err.Error())
	}
	e.Idem = ie
	for _, s := range Settings {
		if s.set == nil {
			continue
		}
		if v := strings.TrimSpace(getenv(s.Name)); v != "" {
			if err := s.set(&e, v); err != nil {
				p = append(p, fmt.Sprintf("%s=%q: %v", s.Name, v, err))
			}
		}
	}
	p = append(p, e.between()...)
	if len(p) > 0 {
		return e, errors.New("host: invalid environment: " + strings.Join(p, "; "))
	}
	return e, nil
}

// between checks the settings that depend on one another and fills
// IdempotencyTableRegion's default.
func (e *Env) between() []string {
	var p []string
	if e.CrossRegion == CrossRegionFenced && e.FenceTable == "" {
		p = append(p, fmt.Sprintf("%s=fenced-effects needs %s", EnvCrossRegion, EnvFenceTable))
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

func whole(lo, hi int, want string, assign func(*Env, int)) func(*Env, string) error {
	return func(e *Env, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return errors.New("want " + want)
		}
		assign(e, n)
		return nil
	}
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

// settingsTable renders Settings as README.md's configuration table
// (Markdown: variable, default, meaning).
func settingsTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n| --- | --- | --- |\n")
	for _, s := range Settings {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, s.Default, s.Doc)
	}
	return b.String()
}
