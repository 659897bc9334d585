package apifn

import "github.com/idemkit/idemkit/functions/host/kit"

// ConfigFromKit is the Config the api function runs with over the wired
// host k (kit.NewKit with the runs, Layer 1 and the ledger): its stores,
// Layer 1 and Layer 2, the webhook destination policy, the advertised
// cross-region posture, declared replication lag bound (0 included) and long-poll cap
// (POLL_MAX_WAIT_SECONDS) from k.Env, and k's
// logger. The api function's main and `idemkit dev` both build theirs
// here; dev then sets what only it has (BaseURL, ReplayFixtures, Test).
func ConfigFromKit(k *kit.Kit) Config {
	// The api reads effect records only (the witness): the kit's Witness,
	// the local replica, or its Ledger when no Witness is set.
	witness := k.Witness
	if witness == nil {
		witness = k.Ledger
	}
	return Config{Runs: k.Runs, Guard: k.Guard, Ledger: witness, Webhook: k.Env.Webhook,
		CrossRegion: k.Env.CrossRegion, ReplicationLagBoundMs: k.Env.ReplicationLagBoundMs, ReplicationLagBoundDeclared: true, PollMaxWait: k.Env.PollMaxWait, Logger: k.Logger}
}
