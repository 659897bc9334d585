// Package ledger is idemkit's Layer 2: it makes a run's external effects
// exactly-once in effect (OpenWOP v2 core "Idempotency" Layer 2, with OpenWOP effect identity, replay and split-brain safety).
//
// An effect has a stable identity, computed once per logical activity and
// never from the attempt (package ledger/identity computes it): its business identity (identity.FromBusiness, the rule)
// or the activity recipe v2 (identity.FromActivity, the fallback). Ledger.Do is a
// durable, cross-process singleflight over that identity:
//
//  1. claim: an insert-if-absent of the effect record; of any number of
//     racing executors exactly one wins;
//  2. fire mark: the point of no return, after which the provider may have
//     been reached. Without a Fencer nothing happens between the claim and
//     the call but a context check, so the claim is the fire mark: it is
//     written in state "firing" with its attempt marked fired, and no
//     separate write is made. With a Fencer the fire mark is a write of its
//     own, fenced on the owner token and carrying a fencing token from a
//     linearizable owner taken just before it (see Fencer);
//  3. the effect function runs with the provider key (Identity.ProviderKey),
//     the same on every attempt, so a provider that honours Idempotency-Key
//     deduplicates a retry;
//  4. outcome: success or failure is recorded, fenced on the owner token.
//
// A first effect therefore costs two store writes (claim, outcome) without a
// Fencer and three with one (claim, fire mark, outcome).
//
// A duplicate, concurrent or later and from any entry point, gets the recorded
// outcome and fires nothing. While the effect function runs, a heartbeat
// renews the lease (Config.Heartbeat), fenced on the owner token. A claim
// whose lease expired is reclaimed atomically; the stalled attempt becomes
// "escaped" when it had passed the fire mark (it may have reached the
// provider) and "released" otherwise. Without a Fencer the claim is the
// point of no return, so an executor that dies after its claim and before
// calling the provider is shown "escaped" (may have fired) rather than
// "released"; the next attempt reuses the same provider key, so nothing
// fires twice at a provider that honours it. An executor that is still
// alive and knows it did not call the provider (its context ended right
// after the claim) releases the attempt. Attempts per effect are capped
// (Config.MaxAttempts) and so is the recorded value (Config.MaxValueBytes),
// so a record always fits in one DynamoDB item.
//
// Ledger.DoStream is Do for a streamed response body: the body goes to the
// caller's writer and is never cached; the request digest, the final outcome
// and the body's SHA-256 and length are recorded. Runs stamp their recipes
// (identity.Stamps, identity.CurrentStamps) and derive identities through them, so a
// recorded identity is never recomputed under another recipe.
//
// The witness (Ledger.Witness, GET /runs/{runId}/effects) lists every effect
// record a run created or made an attempt at (and, with
// Config.WitnessDuplicates, was suppressed by), with all its attempts.
//
// Layer 2 never uses DynamoDB transactions, so the effects table can be a
// global table. The Store interface is the only persistence seam: memstore
// (in memory) and dynamostore (DynamoDB) implement it and both pass the one
// conformance suite in ledgertest. This package never imports the AWS SDK.
//
// The package also holds fire-once slots for the host's own work (identity.Slot,
// Ledger.FireOnce): never released on failure, and kept in a keyspace that
// no caller Idempotency-Key can reach.
package ledger
