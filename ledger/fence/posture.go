package fence

// CrossRegion is a host's cross-region posture for idempotency (fenced cross-region effect ownership;
// recovery strategies), advertised in GET /.well-known/openwop as
// capabilities.idempotency.crossRegion and partitionRecoveryStrategy.
type CrossRegion string

const (
	// SingleRegion: one region; no cross-region guarantee.
	SingleRegion CrossRegion = "single-region"
	// ReconciledRecords: an MREC global table; records converge
	// (last-writer-wins, conflicts audited) but an effect whose provider does
	// not deduplicate on the stable key is at-least-once-risk.
	ReconciledRecords CrossRegion = "reconciled-records"
	// FencedEffects: every effect is fenced by this package's Owner (or its
	// provider deduplicates on the stable key); records converge.
	FencedEffects CrossRegion = "fenced-effects"
)

// Valid reports whether c is one of the three postures.
func (c CrossRegion) Valid() bool {
	return c == SingleRegion || c == ReconciledRecords || c == FencedEffects
}

// EffectRisk is the classification of one effect under a posture.
type EffectRisk string

const (
	// ExactlyOnce: the effect is issued at most once per identity and its
	// outcome is recorded.
	ExactlyOnce EffectRisk = "exactly-once"
	// AtLeastOnceRisk: under a partition the effect may be issued once per
	// region (fenced cross-region effect ownership).
	AtLeastOnceRisk EffectRisk = "at-least-once-risk"
)

// Classify returns the risk of an effect under posture c. providerDedups
// says the provider suppresses duplicates of the stable provider key (e.g.
// honours Idempotency-Key for at least the replication-lag bound). Under
// reconciled-records an effect is at-least-once-risk unless its provider
// deduplicates; under fenced-effects and single-region it is not. A
// posture that is not one of the three (unset, a removed name such as
// "best-effort" or "strict") claims nothing: it is classified as
// reconciled-records is.
func Classify(c CrossRegion, providerDedups bool) EffectRisk {
	if providerDedups || c == SingleRegion || c == FencedEffects {
		return ExactlyOnce
	}
	return AtLeastOnceRisk
}
