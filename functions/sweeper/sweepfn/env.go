package sweepfn

import (
	"github.com/idemkit/idemkit/idem/idemenv"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// NewFromEnv returns the handler the function runs, configured by the
// environment (settings.LoadEnv): it sweeps
//
//   - EFFECTS_TABLE (key pk, sk), through client;
//   - FENCE_TABLE (key pk), when set, through kit.FenceClient (the
//     FENCE_TABLE_REGION home region when set);
//   - IDEMPOTENCY_TABLE (key pk), when set, through kit.HomeClient (the
//     IDEMPOTENCY_TABLE_REGION home region when set, fenced-effects only).
//
// At least one of them must be set, and a table not set is not swept. Set
// only the tables that have no TTL: the template's sweeper sets
// EFFECTS_TABLE under EffectsConsistency=STRONG (an MRSC effects table) or
// in a fenced-effects home stack, and IDEMPOTENCY_TABLE in a fenced-effects
// home stack (neither table has TTL there: a TTL delete in another replica
// would replicate onto the home region's record), each only then, and grants dynamodb:Scan and
// dynamodb:DeleteItem on exactly those tables; FENCE_TABLE is for
// deployments that put the fence table on an MRSC table too (the role then
// needs the same two actions on it). IDEMPOTENCY_TABLE under a policy whose retention is Forever
// (IDEMPOTENCY_POLICY=commerce without IDEMPOTENCY_RETENTION_HOURS, or
// IDEMPOTENCY_RETENTION_HOURS=forever) is refused: nothing may delete such a
// record. Margin, Now: defaults. metrics and logger are used as given. An
// error lists every problem and matches ErrConfig.
func NewFromEnv(env settings.Env, client *dynamodb.Client, metrics *emf.Recorder, logger *slog.Logger) (*Handler, error) {
	var p configerr.List
	if client == nil {
		p.Addf("no DynamoDB client")
	}
	if env.EffectsTable == "" && env.FenceTable == "" && env.Idem.Table == "" {
		p.Addf("set at least one of %s, %s, %s", settings.EnvEffectsTable, settings.EnvFenceTable, idemenv.Table)
	}
	if env.Idem.Table != "" && env.Idem.EffectiveRetention() == idem.Forever {
		// Under a policy that keeps records forever (the commerce policy,
		// or IDEMPOTENCY_RETENTION_HOURS=forever) no Layer-1 record may be
		// deleted, not even one written with an expiry under an earlier
		// policy: refuse rather than sweep.
		p.Addf("%s is set but the %s policy keeps Layer-1 records forever: the sweeper never deletes them (unset %s)",
			idemenv.Table, env.Idem.PolicyName(), idemenv.Table)
	}
	if err := p.Err("sweepfn", ErrConfig); err != nil {
		return nil, err
	}
	h := &Handler{Metrics: metrics, Logger: logger}
	// Every table is swept in Segments rotating segments (sweeper.Sweeper.Segments).
	if env.EffectsTable != "" {
		h.Targets = append(h.Targets, Target{Label: TableEffects,
			Sweeper: &sweeper.Sweeper{API: client, Table: env.EffectsTable, KeyAttrs: []string{"pk", "sk"}, Segments: Segments}})
	}
	if env.FenceTable != "" {
		h.Targets = append(h.Targets, Target{Label: TableFence,
			Sweeper: &sweeper.Sweeper{API: kit.FenceClient(client, env.FenceTableRegion), Table: env.FenceTable, Segments: Segments}})
	}
	if env.Idem.Table != "" {
		h.Targets = append(h.Targets, Target{Label: TableIdempotency,
			Sweeper: &sweeper.Sweeper{API: kit.HomeClient(client, env.IdempotencyTableRegion), Table: env.Idem.Table, Segments: Segments}})
	}
	return h, h.Validate()
}
