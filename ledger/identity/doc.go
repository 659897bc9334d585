// Package identity names what the ledger records: an effect's stable
// identity (activity identity v2, or a business identity), the provider
// idempotency key derived from it, the recipe stamps a run records, and the
// fire-once slots of the host's own work.
//
// Every identity here is a pure function of its inputs: the same inputs give
// the same EffectID and ProviderKey on every attempt, in every process and
// region, and no identity contains an attempt number. A NUL inside any
// input, an empty required input, or a tenant outside the tenantId grammar
// is rejected with an error matching ErrInvalid, never hashed into an
// identity that could collide with another.
//
//	id, err := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "charge", Ordinal: 1, Provider: "stripe"})
//	// id.EffectID is "acme/<43 base64url characters>"; id.ProviderKey is
//	// what the provider receives as Idempotency-Key.
//
// The package has no dependency on the ledger: stores, hosts and tests
// compute and check identities without a Ledger.
package identity
