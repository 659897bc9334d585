package host

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/ledger"
)

// Environment variables of the functions (template.yaml sets them).
const (
	EnvRunsTable        = "RUNS_TABLE"             // RunsTable name (api, executor)
	EnvEffectsTable     = "EFFECTS_TABLE"          // EffectsTable name (api, executor)
	EnvAPIKeysTable     = "API_KEYS_TABLE"         // ApiKeysTable name (authorizer)
	EnvFenceTable       = "FENCE_TABLE"            // FenceTable name (executor, fenced-effects only)
	EnvFenceTableRegion = "FENCE_TABLE_REGION"     // FenceTable's home region (multi-region); default: the function's region
	EnvEffectLease      = "EFFECT_LEASE_SECONDS"   // ledger claim lease, default 300
	EnvEffectRetention  = "EFFECT_RETENTION_DAYS"  // ledger retention, default and minimum 14
	EnvCrossRegion      = "CROSS_REGION"           // single-region (default) | reconciled-records | fenced-effects
	EnvWebhookAllowlist = "WEBHOOK_ALLOWLIST"      // comma-separated hosts, "*.example.com" for subdomains
	EnvWebhookLoopback  = "WEBHOOK_ALLOW_LOOPBACK" // true|false, default false
	EnvWebhookPrivate   = "WEBHOOK_ALLOW_PRIVATE"  // true|false, default false
	EnvDynamoDBEndpoint = "DYNAMODB_ENDPOINT"      // optional endpoint override (LocalStack)
	EnvMetricsNS        = "METRICS_NAMESPACE"      // EMF namespace, default "idemkit"
	EnvTransactional    = "RUNS_TRANSACTIONAL"     // true|false, default true: see DynamoRuns.Transactional
	EnvStreamMaxRetries = "STREAM_MAX_RETRIES"     // executor: the runs stream mapping's MaximumRetryAttempts, default 10
)

// Env is the functions' configuration, read from the environment by
// LoadEnv. Every field documents its variable and default.
type Env struct {
	// Idem is Layer 1's IDEMPOTENCY_* configuration (idem.LoadEnv); its
	// Table is IDEMPOTENCY_TABLE.
	Idem idem.Env
	// RunsTable: RUNS_TABLE. Default "".
	RunsTable string
	// EffectsTable: EFFECTS_TABLE. Default "".
	EffectsTable string
	// APIKeysTable: API_KEYS_TABLE. Default "".
	APIKeysTable string
	// FenceTable: FENCE_TABLE. Default "" (no fencing).
	FenceTable string
	// FenceTableRegion: FENCE_TABLE_REGION, the home region that holds
	// FenceTable. Every region's functions take fencing tokens from that one
	// table (the linearizable owner of fenced-effects), so in a replica
	// region's stack it names the home region; use FenceClient to build the
	// fence store's client. Must look like an AWS region ("eu-west-1").
	// Default "": the function's own region (the home-region stack).
	FenceTableRegion string
	// EffectLease: EFFECT_LEASE_SECONDS (1..3600). Default ledger.DefaultLease
	// (300 s).
	EffectLease time.Duration
	// EffectRetention: EFFECT_RETENTION_DAYS, at least 14. Default
	// ledger.MinRetention (14 days).
	EffectRetention time.Duration
	// CrossRegion: CROSS_REGION. Default "single-region".
	CrossRegion string
	// Webhook: WEBHOOK_ALLOWLIST, WEBHOOK_ALLOW_LOOPBACK, WEBHOOK_ALLOW_PRIVATE.
	// Default: any public host.
	Webhook WebhookPolicy
	// Transactional: RUNS_TRANSACTIONAL. Default true (createRun writes its
	// run in the Layer-1 completion transaction).
	Transactional bool
	// DynamoDBEndpoint: DYNAMODB_ENDPOINT. Default "" (the AWS endpoint).
	DynamoDBEndpoint string
	// MetricsNamespace: METRICS_NAMESPACE. Default "idemkit".
	MetricsNamespace string
	// StreamMaxRetries: STREAM_MAX_RETRIES (0..10000), the runs stream
	// mapping's MaximumRetryAttempts (template.yaml passes its
	// StreamMaxRetries parameter). The executor ends a run failed on the
	// stream's last try, 1 + StreamMaxRetries. Default 10 (the template's
	// default).
	StreamMaxRetries int
}

// LoadEnv reads Env through getenv (os.Getenv in Lambda), reporting every bad
// value at once.
func LoadEnv(getenv func(string) string) (Env, error) {
	var p []string
	ie, err := idem.LoadEnv(getenv)
	if err != nil {
		p = append(p, err.Error())
	}
	e := Env{
		Idem:             ie,
		RunsTable:        strings.TrimSpace(getenv(EnvRunsTable)),
		EffectsTable:     strings.TrimSpace(getenv(EnvEffectsTable)),
		APIKeysTable:     strings.TrimSpace(getenv(EnvAPIKeysTable)),
		FenceTable:       strings.TrimSpace(getenv(EnvFenceTable)),
		FenceTableRegion: strings.TrimSpace(getenv(EnvFenceTableRegion)),
		EffectLease:      ledger.DefaultLease,
		EffectRetention:  ledger.MinRetention,
		CrossRegion:      CrossRegionSingle,
		Transactional:    true,
		DynamoDBEndpoint: strings.TrimSpace(getenv(EnvDynamoDBEndpoint)),
		MetricsNamespace: strings.TrimSpace(getenv(EnvMetricsNS)),
		StreamMaxRetries: 10,
	}
	if e.MetricsNamespace == "" {
		e.MetricsNamespace = "idemkit"
	}
	if v := strings.TrimSpace(getenv(EnvEffectLease)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			p = append(p, fmt.Sprintf("%s=%q: want whole seconds 1..3600", EnvEffectLease, v))
		} else {
			e.EffectLease = time.Duration(n) * time.Second
		}
	}
	if v := strings.TrimSpace(getenv(EnvEffectRetention)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 14 {
			p = append(p, fmt.Sprintf("%s=%q: want whole days, at least 14", EnvEffectRetention, v))
		} else {
			e.EffectRetention = time.Duration(n) * 24 * time.Hour
		}
	}
	if v := strings.TrimSpace(getenv(EnvStreamMaxRetries)); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 10000 {
			p = append(p, fmt.Sprintf("%s=%q: want a whole number 0..10000", EnvStreamMaxRetries, v))
		} else {
			e.StreamMaxRetries = n
		}
	}
	if v := strings.TrimSpace(getenv(EnvCrossRegion)); v != "" {
		if !ValidCrossRegion(v) {
			p = append(p, fmt.Sprintf("%s=%q: want single-region, reconciled-records or fenced-effects", EnvCrossRegion, v))
		}
		e.CrossRegion = v
	}
	if e.FenceTableRegion != "" && !ValidRegion(e.FenceTableRegion) {
		p = append(p, fmt.Sprintf("%s=%q: want an AWS region name such as eu-west-1", EnvFenceTableRegion, e.FenceTableRegion))
	}
	if e.CrossRegion == CrossRegionFenced && e.FenceTable == "" {
		p = append(p, fmt.Sprintf("%s=fenced-effects needs %s", EnvCrossRegion, EnvFenceTable))
	}
	if v := strings.TrimSpace(getenv(EnvWebhookAllowlist)); v != "" {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				e.Webhook.Allow = append(e.Webhook.Allow, h)
			}
		}
	}
	parseBool := func(name string, dst *bool) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				p = append(p, fmt.Sprintf("%s=%q: want true or false", name, v))
				return
			}
			*dst = b
		}
	}
	parseBool(EnvWebhookLoopback, &e.Webhook.AllowLoopback)
	parseBool(EnvWebhookPrivate, &e.Webhook.AllowPrivate)
	parseBool(EnvTransactional, &e.Transactional)
	if len(p) > 0 {
		return e, errors.New("host: invalid environment: " + strings.Join(p, "; "))
	}
	return e, nil
}

// Require reports the named tables that are empty.
func (e Env) Require(names ...string) error {
	var missing []string
	for _, n := range names {
		var v string
		switch n {
		case EnvRunsTable:
			v = e.RunsTable
		case EnvEffectsTable:
			v = e.EffectsTable
		case EnvAPIKeysTable:
			v = e.APIKeysTable
		case idem.EnvTable:
			v = e.Idem.Table
		case EnvFenceTable:
			v = e.FenceTable
		}
		if v == "" {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("host: missing environment: %s", strings.Join(missing, ", "))
	}
	return nil
}
