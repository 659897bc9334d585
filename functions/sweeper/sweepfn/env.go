package sweepfn

import (
	"errors"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// NewFromEnv returns the handler the function runs, configured by the
// environment (host.LoadEnv): it sweeps
//
//   - EFFECTS_TABLE (key pk, sk), through client;
//   - FENCE_TABLE (key pk), when set, through host.FenceClient (the
//     FENCE_TABLE_REGION home region when set);
//   - IDEMPOTENCY_TABLE (key pk), when set, through host.HomeClient (the
//     IDEMPOTENCY_TABLE_REGION home region when set, fenced-effects only).
//
// At least one of them must be set. Set only the tables that have no TTL:
// the template's sweeper (EffectsConsistency=STRONG) sets EFFECTS_TABLE
// only, since FenceTable and IdempotencyTable keep their TTL there; the
// other two are for deployments that put them on an MRSC table too (the
// function's role then needs dynamodb:Scan and dynamodb:DeleteItem on
// them). Margin, Now: defaults. metrics and logger are used as given.
func NewFromEnv(env host.Env, client *dynamodb.Client, metrics *emf.Recorder, logger *slog.Logger) (*Handler, error) {
	if client == nil {
		return nil, errors.New("sweepfn: no DynamoDB client")
	}
	h := &Handler{Metrics: metrics, Logger: logger}
	if env.EffectsTable != "" {
		h.Targets = append(h.Targets, Target{Label: TableEffects,
			Sweeper: &sweeper.Sweeper{API: client, Table: env.EffectsTable, KeyAttrs: []string{"pk", "sk"}}})
	}
	if env.FenceTable != "" {
		h.Targets = append(h.Targets, Target{Label: TableFence,
			Sweeper: &sweeper.Sweeper{API: host.FenceClient(client, env.FenceTableRegion), Table: env.FenceTable}})
	}
	if env.Idem.Table != "" {
		h.Targets = append(h.Targets, Target{Label: TableIdempotency,
			Sweeper: &sweeper.Sweeper{API: host.HomeClient(client, env.IdempotencyTableRegion), Table: env.Idem.Table}})
	}
	if len(h.Targets) == 0 {
		return nil, errors.New("sweepfn: set at least one of " + host.EnvEffectsTable + ", " + host.EnvFenceTable + ", " + idem.EnvTable)
	}
	return h, h.Validate()
}
