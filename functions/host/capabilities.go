package host

import (
	"encoding/json"
	"fmt"
)

// Cross-region postures (capabilities idempotency.crossRegion, RFC 0150 §D).
const (
	CrossRegionSingle     = "single-region"
	CrossRegionReconciled = "reconciled-records"
	CrossRegionFenced     = "fenced-effects"
)

// ValidCrossRegion reports whether s is one of the three postures.
func ValidCrossRegion(s string) bool {
	return s == CrossRegionSingle || s == CrossRegionReconciled || s == CrossRegionFenced
}

// ProtocolVersion is the OpenWOP version this host speaks (OpenWOP-Version).
const ProtocolVersion = "2.21"

// CapabilitiesDoc returns the GET /.well-known/openwop document for a
// deployment whose posture is crossRegion. Its idempotency family states
// what this deployment does: Layer 1 on every mutating route and Layer 2 on
// every effectful node (status "supported"), the witness at
// GET /runs/{runId}/effects, and crossRegion as configured (CROSS_REGION,
// fixed per deployment by the template parameter CrossRegion, so the
// advertisement is constant for the deployment's life). The family carries
// only keys the v2 capabilities schema allows (status, since, witness,
// crossRegion). The result is a pure function of crossRegion:
// byte-identical on every call.
//
// The behavioural facet multiRegion (with its replicationLagBoundMs and
// partitionRecoveryStrategy) is advertised under none of the three postures
// this kit ships, because it promises that BOTH layers hold across regions
// (seed 000 § Multi-region): an Idempotency-Key replayed into a second
// region resolves to the first region's response instead of starting new
// work, and a duplicate effect collapses wherever it is observed.
//
//   - single-region has no second region.
//   - reconciled-records: Layer 2 is at-least-once-risk across regions (an
//     MREC condition is checked only against the local replica), so the
//     effect half fails.
//   - fenced-effects: Layer 2 holds (the home-region fence is
//     linearizable), but Layer 1 still lives in an MREC global table: a key
//     replayed into the second region before its record has replicated —
//     within the replication lag, and for the whole of a partition — starts
//     new work. DynamoDB publishes no bound on MREC replication lag and a
//     partition has none, so no replicationLagBoundMs could be stated
//     truthfully either.
//
// crossRegion (the posture) is still advertised; a client must not infer a
// cross-region promise from it alone (seed 000). docs/MULTI_REGION.md states
// what each posture does guarantee, each claim backed by a named test.
func CapabilitiesDoc(crossRegion string) ([]byte, error) {
	if !ValidCrossRegion(crossRegion) {
		return nil, fmt.Errorf("host: crossRegion %q is not single-region, reconciled-records or fenced-effects", crossRegion)
	}
	idem := map[string]any{
		"status":      "supported",
		"since":       "2.0",
		"witness":     "witnessable-gated",
		"crossRegion": crossRegion,
	}
	doc := map[string]any{
		"protocolVersions": []string{ProtocolVersion},
		"preferredVersion": ProtocolVersion,
		"host":             map[string]any{"name": "idemkit", "workflows": Workflows},
		"idempotency":      idem,
	}
	return json.Marshal(doc)
}
