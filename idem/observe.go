package idem

import (
	"encoding/json"
)

// Metric names (CloudWatch EMF, via internal/emf). Dimensions are bounded:
// MetricClaimOutcomes carries only Outcome.
const (
	// MetricClaimOutcomes counts claim outcomes, dimension Outcome: one of
	// OutcomeClaimed, OutcomeReclaimed, OutcomeReplay, OutcomeInFlight,
	// OutcomeMismatch.
	MetricClaimOutcomes = "idemkit.idempotency.claim_outcomes_total"
	// MetricReclaims counts reclaims of expired leases and retryable failures
	// (RFC 0150 §F).
	MetricReclaims = "openwop.idempotency.reclaims_total"
	// MetricFenceRejections counts writes rejected because the writer no
	// longer owned the record (RFC 0150 §F).
	MetricFenceRejections = "openwop.idempotency.stale_fence_rejections_total"
)

// Claim outcomes (the Outcome dimension of MetricClaimOutcomes, and the
// "outcome" log attribute).
const (
	OutcomeClaimed   = "claimed"
	OutcomeReclaimed = "reclaimed"
	OutcomeReplay    = "replay"
	OutcomeInFlight  = "in-flight"
	OutcomeMismatch  = "mismatch"
)

func (g *Guard) count(name string, outcome string) {
	if g.cfg.Metrics == nil {
		return
	}
	var dims map[string]string
	if outcome != "" {
		dims = map[string]string{"Outcome": outcome}
	}
	g.cfg.Metrics.Count(name, 1, dims)
}

// envelopeCode returns the "error" member of a JSON error envelope, or "".
func envelopeCode(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error
}
