package webhook

import (
	"context"
	"encoding/json"
	"github.com/idemkit/idemkit/ledger/identity"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
)

// The outbound effect seams of the reference host's node runtime (the
// effect-seam manifest names each one): every one leaves the host by HTTP
// through Webhook's client, behind runs.CheckSeam and runs.GuardSeam.
const (
	// SeamWebhookDeliver is the webhook workflow's delivery node.
	SeamWebhookDeliver = "webhook.deliver"
	// SeamSideEffect is the conformance side-effect node
	// (core.conformance.side-effect): one POST to its destination.
	SeamSideEffect = "conformance.side-effect"
)

// sideEffectProvider is the providerKey part of a side-effect node's
// activity identity.
const sideEffectProvider = "conformance.side-effect"

// NodeIdentity is the identity of the execution with ordinal `ordinal`
// (0 for a node's first execution in a run, n-1 for its n-th) of a
// side-effecting node of run runID, under stamps: the activity identity
// over (tenant, runID, nodeID, ordinal, provider). A replay passes the
// SOURCE run's id and stamps, so the outcome it resolves is keyed on
// (sourceRunId, nodeId, n).
func NodeIdentity(stamps identity.Stamps, tenant, runID, nodeID string, ordinal uint64) (identity.Identity, error) {
	return stamps.ActivityIdentity(identity.Activity{Tenant: tenant, RunID: runID, NodeID: nodeID, Ordinal: ordinal, Provider: sideEffectProvider})
}

// DeliverNode performs one execution of a side-effecting node of run: a
// POST of payload to dest through the ledger under NodeIdentity (the run's
// EffectStamps: a fork's new work uses the host's selected recipes), with
// the delivery guarantees of Deliver, behind SeamSideEffect.
func (w *Webhook) DeliverNode(ctx context.Context, run runs.Run, nodeID string, ordinal uint64, dest string, payload json.RawMessage) (ledger.Result, error) {
	w.defaults()
	id, err := NodeIdentity(run.EffectStamps(), run.Tenant, run.ID, nodeID, ordinal)
	if err != nil {
		return ledger.Result{}, err
	}
	eff := ledger.Effect{Identity: id, RunID: run.ID, NodeID: nodeID,
		Retry: &ledger.Retry{MaxAttempts: w.MaxTries, Budget: w.Budget, Base: w.Backoff, Max: w.MaxBackoff}}
	return w.deliver(ctx, SeamSideEffect, eff, dest, payload)
}
