package settings

import "github.com/idemkit/idemkit/functions/host/webhook"

// ReplayRetentionDays is the replay facet's retention.days: a run can be
// forked for 14 days after its creation, the Layer-2 ledger's minimum
// retention (every record a replay resolves from is kept at least that
// long after its last write). Runs themselves, and forks, are kept as
// every run is (docs/REPLAY.md).
const ReplayRetentionDays = 14

// replayFamily is the discovery `replay` family: both fork modes, the
// manifest address, the retention window. Suppression binds with it (no
// field turns it off).
func replayFamily() map[string]any {
	return map[string]any{
		"status": "stable", "since": ProtocolVersion, "witness": "witnessable-gated",
		"modes":               []string{"replay", "branch"},
		"retention":           map[string]any{"days": ReplayRetentionDays},
		"effectSeamsManifest": EffectSeamsPath,
	}
}

// replayFixtures are the fixtures whose side-effecting node needs a
// destination of the host's own (WithReplayFixtures).
var replayFixtures = []string{webhook.WorkflowReplayOrdinalLoop, webhook.WorkflowReplaySideEffect}

// WithReplayFixtures advertises the graph fixtures with a side-effecting
// node (conformance-replay-ordinal-loop, conformance-replay-side-effect)
// in fixtures[]: set where the executor has a fixture destination for
// them (`idemkit dev`).
func WithReplayFixtures() CapabilityOption {
	return func(o *capOptions) { o.replayFixtures = true }
}
