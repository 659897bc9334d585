package settings

import (
	"encoding/json"
	"fmt"

	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
)

// Cross-region postures (capabilities idempotency.crossRegion, fenced cross-region effect ownership).
const (
	CrossRegionSingle     = "single-region"
	CrossRegionReconciled = "reconciled-records"
	CrossRegionFenced     = "fenced-effects"
)

// validCrossRegion reports whether s is one of the three postures.
func validCrossRegion(s string) bool {
	return s == CrossRegionSingle || s == CrossRegionReconciled || s == CrossRegionFenced
}

// ProtocolVersion is the OpenWOP version this host speaks (OpenWOP-Version).
const ProtocolVersion = "2.21"

// PartitionRecoveryHomeRegionFence is the multiRegion.partitionRecoveryStrategy
// idemkit advertises under fenced-effects: a host extension in the
// capabilities schema's `^x-host-<host>-<key>$` namespace (host "idemkit",
// key "home-region-fence"; it matches `^x-host-[a-z][a-z0-9-]*-[a-z][a-z0-9-]*$`).
//
// The strategy: there is nothing to reconcile before acting, because the
// home region is the single linearizable owner of both layers. Every
// Layer-1 claim, completion and replay is a conditional write or consistent
// read against the home region's IdempotencyTable replica
// (IDEMPOTENCY_TABLE_REGION), every effect record is written in the home
// region's EffectsTable replica, and every effect is fenced by the home
// region's FenceTable (FENCE_TABLE_REGION). During a partition the region
// that cannot reach the home region fails closed — 503
// idemkit.store_unavailable with Retry-After, never new work and never a
// fire — and
// after healing the survivor of any key or effect is the one the home
// region recorded: deterministic and reproducible from the home region's
// history, with no clock involved (fenced cross-region effect ownership rules out time-ordered
// strategies). Replicated records elsewhere converge to it; reconciling
// them never authorises an effect.
const PartitionRecoveryHomeRegionFence = "x-host-idemkit-home-region-fence"

// Bounds of multiRegion.replicationLagBoundMs (capabilities schema 0..60000).
const (
	DefaultReplicationLagBoundMs = 2000
	maxReplicationLagBoundMs     = 60000
)

// CapabilityOption adjusts CapabilitiesDoc.
type CapabilityOption func(*capOptions)

type capOptions struct {
	lagBoundMs     int
	seams          bool
	policy         string
	replayFixtures bool
	layer1Off      bool
}

// ExtensionIdempotency is the discovery extension (the schema's
// `<org>.<name>` seat under extensions; the idempotency family itself is
// closed) stating the active idempotency policy: {"policy": NAME,
// "replayOmitsHeaders": ["Set-Cookie"], "replayOmitsHeadersReason": ...},
// NAME one of idem.PolicyNames (IDEMPOTENCY_POLICY, `idemkit dev
// --policy`). replayOmitsHeaders is the one deviation, under every policy,
// from "a replay is the first answer's status, headers and body"
// (ReplayOmitsHeadersReason says why).
const ExtensionIdempotency = "idemkit.idempotency"

// ReplayOmitsHeaders are the response headers Layer 1 never stores and so
// never replays (idem's cacheable copy of a response drops them).
var ReplayOmitsHeaders = []string{"Set-Cookie"}

// ReplayOmitsHeadersReason is why, as discovery states it.
const ReplayOmitsHeadersReason = "Set-Cookie is never cached: a cookie is a credential or session state issued to the caller " +
	"that received the first answer; replaying it would hand that cookie to whoever sends the key again and " +
	"re-issue a cookie whose lifetime has moved on. The first answer carries it; a replay carries every other header."

// WithIdempotencyPolicy advertises the active idempotency policy by name
// (extensions["idemkit.idempotency"].policy). Default "openwop", the
// policy Layer 1 uses when none is configured.
func WithIdempotencyPolicy(name string) CapabilityOption {
	return func(o *capOptions) {
		if name != "" {
			o.policy = name
		}
	}
}

// WithLayer1Off describes a deployment whose Layer 1 is off
// (IDEMPOTENCY_ENABLED=false): every request runs directly, so the same
// Idempotency-Key twice does the work twice. The document then has no
// `idempotency` family (a host advertises only what it does, and the family
// claims that a retry with the same key is answered from the key's record)
// and no extensions["idemkit.idempotency"] (no policy is applied); the
// operation gated on the family, getRunEffects, answers 404 not_found as
// an unadvertised gated operation. Everything else is unchanged.
func WithLayer1Off() CapabilityOption {
	return func(o *capOptions) { o.layer1Off = true }
}

// SeamsProfile is the conformance seams profile id (api/seams-v2.yaml)
// advertised as conformance.seamsProfile by WithConformanceSeams.
const SeamsProfile = "openwop-conformance-seams-v2"

// WithConformanceSeams advertises the conformance seams profile
// (conformance.seamsProfile = SeamsProfile). Only `idemkit dev
// --conformance-seams`, which serves the seams, sets it; the api function
// of the deployed stack has no setting that does.
func WithConformanceSeams() CapabilityOption {
	return func(o *capOptions) { o.seams = true }
}

// fixtures are the conformance fixture workflow ids the host seeds,
// advertised as the discovery root's fixtures[] (the conformance suite runs
// a fixture-gated scenario only for an advertised id).
var fixtures = []string{webhook.WorkflowNoop, webhook.WorkflowDelay, webhook.WorkflowUnavailable}

// extensionWorkflows is the discovery extension (the schema's `<org>.<name>`
// seat under extensions) listing every built-in workflow id, fixtures and
// the webhook workflow alike: {"builtIn": Workflows}.
const extensionWorkflows = "idemkit.workflows"

// WithReplicationLagBound sets multiRegion.replicationLagBoundMs (0..60000;
// Env.ReplicationLagBoundMs, template parameter ReplicationLagBoundMs).
// Default DefaultReplicationLagBoundMs. Only fenced-effects advertises it.
func WithReplicationLagBound(ms int) CapabilityOption {
	return func(o *capOptions) { o.lagBoundMs = ms }
}

// CapabilitiesDoc returns the GET /.well-known/openwop document for a
// deployment whose posture is crossRegion, valid against the closed v2
// discovery schema (capabilities.schema.json): protocolVersions and
// preferredVersion (ProtocolVersion), implementation {name: "idemkit"},
// fixtures[] (fixtures), extensions["idemkit.workflows"] (every built-in
// workflow), extensions["idemkit.idempotency"] (the active idempotency
// policy, WithIdempotencyPolicy), conformance.seamsProfile only WithConformanceSeams, and the
// idempotency family (neither the family nor the policy extension
// WithLayer1Off). The family states what this deployment does: Layer 1
// on every mutating route and Layer 2 on every effectful node (status
// "stable", since ProtocolVersion: the minor of this host's own contract at
// which it serves the family, a member of protocolVersions), the witness at
// GET /runs/{runId}/effects, crossRegion as configured (CROSS_REGION, fixed
// per deployment by the template parameter CrossRegion), and — under
// fenced-effects only — the behavioural multiRegion facet. The family
// carries only keys of the v2 capabilities schema (status, since, witness,
// multiRegion {replicationLagBoundMs, partitionRecoveryStrategy},
// crossRegion). The result is a pure function of its arguments:
// byte-identical on every call, so the advertisement is constant for the
// deployment's life.
//
// multiRegion promises that BOTH layers hold across regions (the v2
// capabilities schema's idempotency family, which points to the v1
// idempotency annex for the rules): an Idempotency-Key replayed into a second region resolves
// to the first region's response instead of starting new work, and a
// duplicate effect collapses wherever it is observed. Per posture:
//
//   - single-region: crossRegion "single-region", no multiRegion (there is
//     no second region to promise anything about).
//   - reconciled-records: crossRegion only, no multiRegion. Both layers live
//     in MREC global tables whose conditions are checked only against the
//     local replica: an effect is at-least-once-risk across regions unless
//     its provider deduplicates on the stable key, and a Layer-1 key replayed
//     into the second region within the replication lag, or during a
//     partition, starts new work there (TestLayer1ReplayWithinLagStartsNewWork
//     in internal/regionsim).
//   - fenced-effects: crossRegion and multiRegion {replicationLagBoundMs,
//     partitionRecoveryStrategy: PartitionRecoveryHomeRegionFence}. Effects
//     are fenced by the home region's FenceTable (at most one provider call
//     per identity, in any region), and Layer 1 is pinned to the home
//     region: claims and completions go to the home region's IdempotencyTable
//     replica from every region (Env.IdempotencyTableRegion, HomeClient), so
//     a replay into the second region resolves to the first region's
//     response regardless of replication lag
//     (TestLayer1HomePinnedReplayWithinLag), and a region cut off from the
//     home region fails closed without running the handler
//     (TestLayer1HomePinnedPartitionFailsClosed). This presumes the caller
//     wires Layer 1 that way; functions/host/kit does whenever CROSS_REGION
//     is fenced-effects (LoadEnv defaults IDEMPOTENCY_TABLE_REGION to the
//     fence's home region).
//
// replicationLagBoundMs is the operator's declared bound (template
// parameter ReplicationLagBoundMs, default 2000; DynamoDB publishes no MREC
// bound, so alarm on the tables' ReplicationLatency metric against it) on
// how long a write takes to reach the other replicas. Under fenced-effects
// neither guarantee above depends on it — both are decided in the home
// region — so both hold even when real lag exceeds the bound or a
// partition lasts. The bound itself is the operator's declaration, not
// enforced: the one replica-local read (GET /runs/{runId}/effects served
// from a replica region's copy of EffectsTable) lags by the real
// replication lag, past the bound during a partition. It is out of range
// unless 0..60000.
//
// crossRegion names the posture (the schema describes what each rung says
// about effects); docs/MULTI_REGION.md states what each posture guarantees,
// each claim backed by a named test.
func CapabilitiesDoc(crossRegion string, opts ...CapabilityOption) ([]byte, error) {
	if !validCrossRegion(crossRegion) {
		return nil, fmt.Errorf("host: crossRegion %q is not single-region, reconciled-records or fenced-effects", crossRegion)
	}
	o := capOptions{lagBoundMs: DefaultReplicationLagBoundMs, policy: idem.PolicyOpenWOP.Name}
	for _, f := range opts {
		f(&o)
	}
	if o.lagBoundMs < 0 || o.lagBoundMs > maxReplicationLagBoundMs {
		return nil, fmt.Errorf("host: replicationLagBoundMs %d is not 0..%d", o.lagBoundMs, maxReplicationLagBoundMs)
	}
	family := map[string]any{
		"status":      "stable",
		"since":       ProtocolVersion,
		"witness":     "witnessable-gated",
		"crossRegion": crossRegion,
	}
	if crossRegion == CrossRegionFenced {
		family["multiRegion"] = map[string]any{
			"replicationLagBoundMs":     o.lagBoundMs,
			"partitionRecoveryStrategy": PartitionRecoveryHomeRegionFence,
		}
	}
	extensions := map[string]any{extensionWorkflows: map[string]any{"builtIn": webhook.Workflows}}
	doc := map[string]any{
		"protocolVersions": []string{ProtocolVersion},
		"preferredVersion": ProtocolVersion,
		"implementation":   map[string]any{"name": "idemkit"},
		"fixtures":         fixtures,
		"extensions":       extensions,
	}
	if !o.layer1Off {
		extensions[ExtensionIdempotency] = map[string]any{"policy": o.policy,
			"replayOmitsHeaders": ReplayOmitsHeaders, "replayOmitsHeadersReason": ReplayOmitsHeadersReason}
		doc["idempotency"] = family
	}
	if o.seams {
		doc["conformance"] = map[string]any{"seamsProfile": SeamsProfile}
	}
	doc["replay"] = replayFamily()
	advertised := append([]string(nil), fixtures...)
	if o.replayFixtures {
		advertised = append(advertised, replayFixtures...)
	}
	if o.seams {
		// The seams-only fixtures: created only where the seams are served.
		advertised = append(advertised, webhook.SeamWorkflows...)
	}
	doc["fixtures"] = advertised
	return json.Marshal(doc)
}

// CapabilitiesDoc returns the capabilities document of the deployment e
// configures: CapabilitiesDoc(e.CrossRegion,
// WithReplicationLagBound(e.ReplicationLagBoundMs),
// WithIdempotencyPolicy(e.Idem.PolicyName())), and WithLayer1Off when
// IDEMPOTENCY_ENABLED is false.
func (e Env) CapabilitiesDoc() ([]byte, error) {
	opts := []CapabilityOption{WithReplicationLagBound(e.ReplicationLagBoundMs), WithIdempotencyPolicy(e.Idem.PolicyName())}
	if !e.Idem.Enabled {
		opts = append(opts, WithLayer1Off())
	}
	return CapabilitiesDoc(e.CrossRegion, opts...)
}
