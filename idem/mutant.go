//go:build !idemkit_mutant_replay_mismatch

package idem

// mutantReplayMismatch is false in every real build. The soak's mutation
// lane builds with the tag idemkit_mutant_replay_mismatch, which sets it:
// a request whose payload differs from the record's is then answered with
// the record's replay instead of 409 idempotency_key_mismatch, a broken
// build the soak's linearizability check must report as Illegal.
const mutantReplayMismatch = false
