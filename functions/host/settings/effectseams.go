package settings

import (
	"encoding/json"
	"runtime/debug"

	"github.com/idemkit/idemkit/functions/host/webhook"
)

// EffectSeamsPath is the address of the effect-seam manifest (the replay
// facet's effectSeamsManifest constant).
const EffectSeamsPath = "/host/effect-seams"

// GuardedBy names the suppression mechanism of every seam of this host.
const GuardedBy = "idemkit replay classification (Layer-2 ledger.Replay keyed on (sourceRunId, nodeId, n)) + default-deny seam guard (runs.CheckSeam / runs.GuardSeam)"

// SeamRow is one row of the effect-seam manifest.
type SeamRow struct {
	Seam          string `json:"seam"`
	Kind          string `json:"kind"`
	Guarded       bool   `json:"guarded"`
	GuardedBy     string `json:"guardedBy"`
	BranchReFires bool   `json:"branchReFires"`
	Note          string `json:"note,omitempty"`
}

// EffectSeams lists every outbound effect path the executor's node runtime
// can reach. Both leave the host by HTTP through the webhook deliverer's
// client; both are guarded (a replay resolves them from the source's
// record and the seam denies under a replay) and both re-fire on a branch,
// by design. The host projects no events outward (no webhook
// subscriptions, no push, no outbound streams), so there is no fan-out
// seam to list.
var EffectSeams = []SeamRow{
	{Seam: webhook.SeamSideEffect, Kind: "http", Guarded: true, GuardedBy: GuardedBy, BranchReFires: true,
		Note: "the conformance side-effect node: one POST to inputs.url or the host's fixture destination"},
	{Seam: webhook.SeamWebhookDeliver, Kind: "http", Guarded: true, GuardedBy: GuardedBy, BranchReFires: true,
		Note: "the webhook workflow's delivery node: one POST to inputs.url"},
}

// EffectSeamManifest returns the GET /host/effect-seams document
// (effect-seam-manifest.schema.json): manifestVersion "1", host {name
// "idemkit", build {kind "commit", id}}, and EffectSeams. build "" means
// the binary's VCS revision, else "unknown".
func EffectSeamManifest(build string) ([]byte, error) {
	if build == "" {
		build = "unknown"
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && s.Value != "" {
					build = s.Value
				}
			}
		}
	}
	return json.Marshal(map[string]any{
		"manifestVersion": "1",
		"host":            map[string]any{"name": "idemkit", "build": map[string]any{"kind": "commit", "id": build}},
		"seams":           EffectSeams,
	})
}
