package settings

import (
	"github.com/idemkit/idemkit/idem/idemenv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/configerr"
)

// Environment variables of the functions (template.yaml sets them). Each
// one's default and range are stated once, in its Settings entry.
const (
	EnvRunsTable        = "RUNS_TABLE"                   // RunsTable name (api, executor)
	EnvEffectsTable     = "EFFECTS_TABLE"                // EffectsTable name (api, executor)
	EnvAPIKeysTable     = "API_KEYS_TABLE"               // ApiKeysTable name (authorizer; executor: signing secrets)
	EnvFenceTable       = "FENCE_TABLE"                  // FenceTable name (executor, fenced-effects only)
	EnvFenceTableRegion = "FENCE_TABLE_REGION"           // FenceTable's home region (multi-region)
	EnvEffectLease      = "EFFECT_LEASE_SECONDS"         // ledger claim lease
	envEffectRetention  = "EFFECT_RETENTION_DAYS"        // ledger retention
	EnvRunRetention     = "RUN_RETENTION_DAYS"           // ended runs' retention (0: forever)
	EnvCrossRegion      = "CROSS_REGION"                 // cross-region posture
	envWebhookAllowlist = "WEBHOOK_ALLOWLIST"            // comma-separated hosts, "*.example.com" for subdomains
	EnvWebhookLoopback  = "WEBHOOK_ALLOW_LOOPBACK"       // admit loopback webhook destinations
	envWebhookPrivate   = "WEBHOOK_ALLOW_PRIVATE"        // admit RFC 1918 webhook destinations
	envWebhookMaxTries  = "WEBHOOK_MAX_TRIES"            // the webhook attempt cap
	envWebhookBudget    = "WEBHOOK_RETRY_BUDGET_SECONDS" // the webhook retry time budget
	EnvDynamoDBEndpoint = "DYNAMODB_ENDPOINT"            // optional endpoint override (LocalStack)
	envMetricsNS        = "METRICS_NAMESPACE"            // EMF namespace
	envTransactional    = "RUNS_TRANSACTIONAL"           // see DynamoRuns.Transactional
	EnvStreamMaxRetries = "STREAM_MAX_RETRIES"           // executor: the runs stream mapping's MaximumRetryAttempts
	EnvStreamRetry      = "STREAM_RETRY_SECONDS"         // idemkit dev: how long a stream poller retries a failing record
	EnvRunStale         = "RUN_STALE_SECONDS"            // executor: a live run without progress this long is resumed
	EnvPollMaxWait      = "POLL_MAX_WAIT_SECONDS"        // api: the longest a pollRunEvents long poll waits
)

// Multi-region environment variables (api function, fenced-effects).
const (
	EnvIdempotencyTableRegion = "IDEMPOTENCY_TABLE_REGION" // IdempotencyTable's home region (fenced-effects only)
	EnvRunsTableRegion        = "RUNS_TABLE_REGION"        // the home region whose RunsTable holds every run (fenced-effects replica api only)
	EnvReplicationLagBound    = "REPLICATION_LAG_BOUND_MS" // multiRegion.replicationLagBoundMs
	EnvHomeFenceTableARN      = "HOME_FENCE_TABLE_ARN"     // replica-region stacks: the home stack's FenceTable, tagged with its CrossRegion
)

// Env is the functions' configuration, read from the environment by
// LoadEnv (the Settings table, settings.go, lists every variable). Every
// field documents its variable; its default and range are its Settings
// entry's (defaults() is Env with every entry's Default).
type Env struct {
	// Warnings are the settings read that do not stop the function but do
	// not do what they say (a WEBHOOK_ALLOWLIST entry that is no host,
	// matching no destination): kit.Boot logs each at every cold start,
	// `idemkit dev` refuses to start with one. They do not fail LoadEnv, so
	// a stack upgraded with such a value keeps serving (RED_TEAM 374).
	Warnings []string
	// Idem is Layer 1's IDEMPOTENCY_* configuration (idemenv.Load); its
	// Table is IDEMPOTENCY_TABLE, its Policy IDEMPOTENCY_POLICY (the
	// policy kit.NewKit gives Layer 1 and discovery advertises).
	Idem idemenv.Env
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
	// Required under fenced-effects, the home stack naming its own region
	// (LoadEnv refuses it unset there); unused by other postures.
	FenceTableRegion string
	// IdempotencyTableRegion: IDEMPOTENCY_TABLE_REGION, the home region
	// whose IdempotencyTable replica owns every Layer-1 record under
	// fenced-effects: claims, completions and replays go there from every
	// region (build the store's client with HomeClient), so a key replayed
	// into a second region resolves to the first region's response whatever
	// the replication lag, and a region cut off from the home region fails
	// closed. Set only with CROSS_REGION=fenced-effects (other postures keep
	// Layer 1 on the local MREC replica); must look like an AWS region and,
	// when FENCE_TABLE_REGION is set, name the same home region. Default:
	// FenceTableRegion under fenced-effects (so a fenced deployment is always
	// home-pinned), else "".
	IdempotencyTableRegion string
	// RunsTableRegion: RUNS_TABLE_REGION, the home region whose RunsTable
	// (RUNS_TABLE names the home stack's table) holds every run under
	// fenced-effects: a replica region's api creates, reads and changes
	// runs there (build the store's client with HomeClient), so
	// GET /runs/{runId} answers the same run in every region at once and
	// createRun keeps its run/record transaction (Layer 1 is in the home
	// region too); the home region's executor runs them. Set only with
	// CROSS_REGION=fenced-effects; must look like an AWS region and name
	// the home region (FENCE_TABLE_REGION). Default "": the local table (a
	// home-region stack, and every executor).
	RunsTableRegion string
	// HomeFenceTableARN: HOME_FENCE_TABLE_ARN, the ARN of the home
	// stack's FenceTable, set in a replica-region stack's api and executor
	// only. The home stack tags that table with its CrossRegion, and
	// kit.Boot reads the tag at start-up: a replica under another
	// CrossRegion than the home's stops (RED_TEAM 537). It must name
	// FENCE_TABLE in FENCE_TABLE_REGION. Default "": nothing is read (a
	// home-region stack, `idemkit dev`).
	HomeFenceTableARN string
	// ReplicationLagBoundMs: REPLICATION_LAG_BOUND_MS, advertised
	// as capabilities idempotency.multiRegion.replicationLagBoundMs under
	// fenced-effects (see CapabilitiesDoc for what it does and does not
	// bound). Default DefaultReplicationLagBoundMs (the template's
	// default).
	ReplicationLagBoundMs int
	// EffectLease: EFFECT_LEASE_SECONDS. Default ledger.DefaultLease.
	EffectLease time.Duration
	// EffectRetention: EFFECT_RETENTION_DAYS. Default and minimum
	// ledger.MinRetention.
	EffectRetention time.Duration
	// RunRetention: RUN_RETENTION_DAYS, how long an ended run (completed,
	// failed, cancelled) is kept after its end before RunsTable's TTL
	// deletes it (runs.DynamoRuns.Retention). Default 0: kept forever. A
	// finite value must be at least EffectRetention and the Layer-1
	// retention (Idem.EffectiveRetention) when that is finite: LoadEnv
	// refuses a smaller one.
	RunRetention time.Duration
	// CrossRegion: CROSS_REGION. Default "single-region".
	CrossRegion string
	// Webhook: WEBHOOK_ALLOWLIST, WEBHOOK_ALLOW_LOOPBACK, WEBHOOK_ALLOW_PRIVATE.
	// Default: any public host.
	Webhook webhook.WebhookPolicy
	// WebhookMaxTries: WEBHOOK_MAX_TRIES, the webhook workflow's attempt
	// cap. Default webhook.DefaultMaxTries.
	WebhookMaxTries int
	// WebhookBudget: WEBHOOK_RETRY_BUDGET_SECONDS, the webhook workflow's
	// retry time budget. Default webhook.DefaultBudget.
	WebhookBudget time.Duration
	// Transactional: RUNS_TRANSACTIONAL. Default true (createRun writes its
	// run in the Layer-1 completion transaction). kit.NewKit does not use a
	// transaction when Layer 1 and the runs live in different regions: a
	// transaction cannot span regions (a fenced replica stack keeps both in
	// the home region, RunsTableRegion).
	Transactional bool
	// DynamoDBEndpoint: DYNAMODB_ENDPOINT. Default "" (the AWS endpoint).
	DynamoDBEndpoint string
	// MetricsNamespace: METRICS_NAMESPACE. Default "idemkit"; template.yaml
	// gives every function its stack's own, idemkit/STACK.
	MetricsNamespace string
	// StreamMaxRetries: STREAM_MAX_RETRIES, the runs stream
	// mapping's MaximumRetryAttempts (template.yaml passes its
	// StreamMaxRetries parameter). The executor ends a run failed on the
	// stream's last try, 1 + StreamMaxRetries.
	StreamMaxRetries int
	// StreamRetry: STREAM_RETRY_SECONDS (1..86400), how long `idemkit
	// dev`'s stream pollers retry a failing record (with backoff, however
	// many tries that takes) before dropping it. Default 15 minutes.
	StreamRetry time.Duration
	// RunStale: RUN_STALE_SECONDS (1..86400), how long a pending or
	// running, unparked run may go without progress (updatedAt) before the
	// executor's stale-run pass claims and drives it (ResumeStale). An
	// executor driving a run renews its claim every third of it (a
	// heartbeat), so a slow node is never overtaken while its executor
	// lives. Default 15 minutes (`idemkit dev`: 60 s).
	RunStale time.Duration
	// PollMaxWait: POLL_MAX_WAIT_SECONDS (1..60), the longest a
	// pollRunEvents long poll waits for an event whatever its timeout
	// asks (apifn.Config.PollMaxWait; the request's deadline less 2 s
	// bounds it too). Default 20 s (apifn.DefaultPollMaxWait).
	PollMaxWait time.Duration
}

// Require reports the named tables that are empty, in one error matching
// ErrConfig.
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
		case idemenv.Table:
			v = e.Idem.Table
		case EnvFenceTable:
			v = e.FenceTable
		}
		if v == "" {
			missing = append(missing, n)
		}
	}
	var p configerr.List
	if len(missing) > 0 {
		p.Addf("missing environment: %s", strings.Join(missing, ", "))
	}
	return p.Err("host", ErrConfig)
}
