//go:build idemkit_mutant_replay_mismatch

package idem

// mutantReplayMismatch: see mutant.go. Never set outside the soak's
// mutation lane.
const mutantReplayMismatch = true
