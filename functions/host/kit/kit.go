// Package kit is the host's start-up and wiring, the one room every
// function's main starts in (the authorizer excepted, which starts from
// boot alone for its cold start): Boot (the logger, the settings read from
// the process environment, the DynamoDB client, the EMF recorder) and
// Begin (the same without the settings or the client, for a function that
// reads only a few variables), the region variants of the client
// (HomeClient, FenceClient), and the stores, Layer 1, Layer 2 and the
// webhook effect over one DynamoDB client (NewKit). It builds on boot, the
// ground both it and the authorizer start from, and it is, with boot, the
// one package of the host that reads the process environment.
package kit

import (
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/idemenv"
	"time"

	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
)

// Kit is the wired host: the stores, Layer 1's Guard, Layer 2's Ledger and
// the webhook effect, built from one settings.Env and one DynamoDB client. The
// Lambda functions and `idemkit dev` build it the same way.
type Kit struct {
	Env   settings.Env
	Runs  runs.RunStore
	Keys  apikeys.KeyStore
	Guard *idem.Guard
	// Ledger runs effects. Under fenced-effects its store is the home
	// region's replica of the effects table, as Layer 1's is (HomeClient):
	// every claim, fire mark and outcome is a conditional write there, so
	// the record that replicates to every region is the one the home
	// region decided, never a stale owner's write from another region.
	Ledger *ledger.Ledger
	// Witness reads effect records for the runs witness
	// (GET /runs/{runId}/effects): the local replica (the same Ledger
	// outside fenced-effects), so the read keeps working while the home
	// region is out of reach, as fresh as replication allows.
	Witness *ledger.Ledger
	Webhook *webhook.Webhook
	Logger  *slog.Logger
	Metrics *emf.Recorder
}

// Parts selects what NewKit builds (each needs its table in Config.Env).
type Parts struct {
	Runs, Keys, Guard, Ledger bool
}

// Config configures NewKit: what it builds (Parts) and everything it is
// built from.
type Config struct {
	// Env is the settings the kit is built from (settings.LoadEnv; Boot
	// reads it). Each part Parts selects needs its table in it. Required.
	Env settings.Env
	// Client is the DynamoDB client every store of the kit uses (Boot
	// builds it). Required when Parts selects anything.
	Client *dynamodb.Client
	// Parts selects what NewKit builds. Default: nothing but Env, Logger
	// and Metrics.
	Parts Parts
	// Logger receives the kit's logs (Layer 1's, the ledger's). Default
	// nil: slog.Default().
	Logger *slog.Logger
	// Metrics receives the kit's EMF metrics. Default nil: none.
	Metrics *emf.Recorder
	// Test holds the hooks only tests and `idemkit dev` set. Default zero.
	Test TestConfig
}

// TestConfig holds NewKit's hooks for tests and development; the Lambda
// functions leave it zero.
type TestConfig struct {
	// GuardWait is Layer 1's duplicate wait budget (idem.Config.Wait): how
	// long a duplicate of an in-flight request waits for its final outcome
	// before the 409 idempotency_in_flight (`idemkit dev
	// --idempotency-wait`). Default 0: idem's default.
	GuardWait time.Duration
}

// ErrConfig is matched (errors.Is) by every error NewKit returns. It wraps
// the error of the package that found the problem, so settings.ErrConfig
// (a missing table), idem.ErrConfig, ledger.ErrConfig, fence.ErrConfig or a
// store's ErrConfig matches too; each of those lists every problem it found.
var ErrConfig = errors.New("kit: invalid config")

// configError wraps err (not nil) as NewKit's error.
func configError(err error) error {
	var p configerr.List
	p.Wrap(err)
	return p.Err("kit", ErrConfig)
}

// NewKit builds the parts of the kit that c.Parts selects over c.Client,
// or returns an error matching ErrConfig.
func NewKit(c Config) (*Kit, error) {
	env, client, p, logger, metrics := c.Env, c.Client, c.Parts, c.Logger, c.Metrics
	if client != nil {
		// A store's error never quotes what its call sent (record ids,
		// run inputs): every part's errors are logged.
		client = dynamodb.New(client.Options(), awserr.RedactValues)
	}
	if logger == nil {
		logger = slog.Default()
	}
	k := &Kit{Env: env, Logger: logger, Metrics: metrics}
	var need []string
	if p.Runs {
		need = append(need, settings.EnvRunsTable)
	}
	if p.Keys {
		need = append(need, settings.EnvAPIKeysTable)
	}
	if p.Guard {
		need = append(need, idemenv.Table)
	}
	if p.Ledger {
		need = append(need, settings.EnvEffectsTable)
	}
	if err := env.Require(need...); err != nil {
		return nil, configError(err)
	}
	// Layer 1's client: under fenced-effects the home region's replica owns
	// every Layer-1 record (IDEMPOTENCY_TABLE_REGION), so a replay into
	// another region resolves to the first response whatever the lag
	// (multi-region: docs/MULTI_REGION.md). A replica region's api keeps
	// its runs there too (RUNS_TABLE_REGION), so a run is read in every
	// region at once and createRun's run/record transaction stays in one
	// region; a transaction cannot span regions, so where the two tables
	// are in different regions createRun writes its run with a
	// conditional PutItem.
	idemClient, runsClient := client, client
	if env.CrossRegion == settings.CrossRegionFenced {
		idemClient = HomeClient(client, env.IdempotencyTableRegion)
		if p.Guard && p.Runs && env.RunsTableRegion == "" && idemClient != client {
			return nil, configError(fmt.Errorf("%s=fenced-effects in a replica region (%s) needs %s=%s: without it a run would be readable in this region only",
				settings.EnvCrossRegion, regionOf(client), settings.EnvRunsTableRegion, env.IdempotencyTableRegion))
		}
		runsClient = HomeClient(client, env.RunsTableRegion)
	}
	if p.Runs {
		transactional := env.Transactional && p.Guard && regionOf(idemClient) == regionOf(runsClient)
		if err := runRetentionNeedsTransaction(env, p, transactional); err != nil {
			return nil, configError(err)
		}
		// DynamoDB itself (no endpoint override) returns the item a
		// refused write found whenever there is one, so a refused run
		// write that returns none found no run: no read to tell
		// (RED_TEAM 521). An endpoint override (an emulator, which may
		// return none) keeps the read.
		k.Runs = &runs.DynamoRuns{Client: runsClient, Table: env.RunsTable, Transactional: transactional, Retention: env.RunRetention,
			MarkerRetention: markerRetention(env, transactional), ReturnsOldOnConditionFailure: runsClient != nil && runsClient.Options().BaseEndpoint == nil}
	}
	if p.Keys {
		k.Keys = &apikeys.DynamoKeys{Client: client, Table: env.APIKeysTable}
	}
	if p.Guard {
		st, err := Layer1Store(idemClient, env.Idem.Table, env.CrossRegion, env.Idem.EffectiveRetention(), metrics)
		if err != nil {
			return nil, configError(err)
		}
		// A body "tenantId" other than the credential's is 403 forbidden:
		// the tenant comes from the credential only.
		cfg := idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: st, Logger: logger, Metrics: metrics, BodyTenantField: "tenantId", Wait: c.Test.GuardWait,
			Routes: Layer1Routes()}
		env.Idem.Apply(&cfg)
		if cfg.Policy.Name != erp.Policy.Name {
			// Rendering per Accept is the ERP policy's; under the others
			// a replay is the first answer byte for byte.
			cfg.Routes[workorder.RouteLive].Contract.Render = nil
		}
		if k.Guard, err = idem.New(cfg); err != nil {
			return nil, configError(err)
		}
	}
	if p.Ledger {
		effectsClient := client
		if env.CrossRegion == settings.CrossRegionFenced {
			effectsClient = HomeClient(client, env.FenceTableRegion)
		}
		effects, err := ledgerdynamo.New(ledgerdynamo.Config{Client: effectsClient, Table: env.EffectsTable})
		if err != nil {
			return nil, configError(err)
		}
		// The ledger's attempt cap bounds every effect's own
		// (ledger.Retry.MaxAttempts): it must not be below the webhook's
		// (WEBHOOK_MAX_TRIES, up to ledger.MaxMaxAttempts), or a delivery
		// would stop at the ledger's default cap of 50.
		lc := ledger.Config{Store: effects, Logger: logger,
			Lease: env.EffectLease, Retention: env.EffectRetention, Metrics: metrics,
			MaxAttempts: max(ledger.DefaultMaxAttempts, env.WebhookMaxTries)}
		var owner *fence.Owner
		if env.CrossRegion == settings.CrossRegionFenced {
			// fenced-effects: every webhook fire passes the linearizable
			// fence owner (FENCE_TABLE in FENCE_TABLE_REGION, the home
			// region) first.
			fs, err := fencedynamo.New(fencedynamo.Config{Client: FenceClient(client, env.FenceTableRegion), Table: env.FenceTable})
			if err != nil {
				return nil, configError(err)
			}
			// A fence item outlives the effect record it guards (a day
			// past the ledger's retention), so an escaped effect's pass
			// is never forgotten while its record is kept.
			o, err := fence.New(fence.Config{Store: fs,
				Region: client.Options().Region, Metrics: metrics,
				Retention: max(fence.DefaultRetention, env.EffectRetention+24*time.Hour)})
			if err != nil {
				return nil, configError(err)
			}
			owner, lc.Fencer = o, o
		}
		l, err := ledger.New(lc)
		if err != nil {
			return nil, configError(err)
		}
		k.Ledger, k.Witness = l, l
		if effectsClient != client {
			local, err := ledgerdynamo.New(ledgerdynamo.Config{Client: client, Table: env.EffectsTable})
			if err != nil {
				return nil, configError(err)
			}
			// The same ledger on the local replica; it only reads, so it
			// takes no fence.
			wc := lc
			wc.Store, wc.Fencer = local, nil
			if k.Witness, err = ledger.New(wc); err != nil {
				return nil, configError(err)
			}
		}
		k.Webhook = &webhook.Webhook{Ledger: l, Policy: env.Webhook, MaxTries: env.WebhookMaxTries, Budget: env.WebhookBudget}
		if env.APIKeysTable != "" {
			// The tenants' signing secrets (whsec# items of the api-keys
			// table, this region's), read through a cache: a delivery
			// adds a GetItem only on its tenant's first in a minute.
			k.Webhook.Secrets = &apikeys.SigningSecrets{Client: client, Table: env.APIKeysTable}
		}
		if owner != nil {
			k.Webhook.Wrap = owner.Guard
		}
	}
	return k, nil
}

// regionOf is c's region, "" for no client.
func regionOf(c *dynamodb.Client) string {
	if c == nil {
		return ""
	}
	return c.Options().Region
}

// Layer1Routes is the api function's per-operation Layer-1 options: the
// live work-order route's canonical request hash and its per-Accept
// rendering (the ERP policy's work-order contract), and JSON for every
// route whose handler reads its body as JSON text whatever the
// Content-Type, so a key binds the body's JSON (its RFC 8785 form) with
// or without a JSON Content-Type, never its bytes (apifn's
// TestEveryJSONRouteIsJSONToLayer1 holds the list to its route table). A
// fresh map on each call.
func Layer1Routes() map[string]idem.Route {
	routes := map[string]idem.Route{workorder.RouteLive: {Contract: workorder.Contract()}}
	for _, op := range jsonOperations {
		routes[op] = idem.Route{JSON: true}
	}
	return routes
}

// jsonOperations are the api function's routes (method and pattern) whose
// body is JSON text whatever its Content-Type: createRun, cancelRun,
// bulkCancelRuns, forkRun, pauseRun and resumeRun read it as JSON; retryRun and the inbox's
// resubmit and discard read none but refuse one that is not strict JSON
// text.
var jsonOperations = []string{
	"POST /runs",
	"POST /runs/{runId}/cancel",
	"POST /runs:bulk-cancel",
	"POST /runs/{runId}:fork",
	"POST /runs/{runId}:pause",
	"POST /runs/{runId}:resume",
	"POST /runs/{runId}/retry",
	"POST /inbox/{id}/resubmit",
	"POST /inbox/{id}/discard",
}
