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

// CapabilitiesDoc returns the GET /.well-known/openwop document. Its
// idempotency family states what this deployment does: Layer 1 on every
// mutating route and Layer 2 on every effectful node (status "supported"),
// the witness at GET /runs/{runId}/effects, and crossRegion as configured
// (single-region unless the effects table is replicated). multiRegion is
// never advertised: a global table's conditional writes are checked only
// against the local replica, so no cross-region promise is made.
func CapabilitiesDoc(crossRegion string) ([]byte, error) {
	if !ValidCrossRegion(crossRegion) {
		return nil, fmt.Errorf("host: crossRegion %q is not single-region, reconciled-records or fenced-effects", crossRegion)
	}
	doc := map[string]any{
		"protocolVersions": []string{ProtocolVersion},
		"preferredVersion": ProtocolVersion,
		"host":             map[string]any{"name": "idemkit", "workflows": Workflows},
		"idempotency": map[string]any{
			"status":      "supported",
			"since":       "2.0",
			"witness":     "witnessable-gated",
			"crossRegion": crossRegion,
		},
	}
	return json.Marshal(doc)
}
