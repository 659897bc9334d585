// Package semantic computes OpenWOP semantic request digest v2: the canonical
// form and SHA-256 digest of a complete LLM provider request (provider, model,
// messages, tools, sampling settings, provider options), the Layer-2 replay
// cache key of an LLM effect.
//
// Two requests share a digest exactly when every input that can change the
// provider's answer is equal; transport-only settings (timeouts, trace
// context, request ids, retry counts, credential handles, tenant and run ids,
// stream, metadata, user) never reach it. A request that cannot be
// hashed faithfully is rejected with an error matching ErrInvalid, never
// hashed with part of it dropped. Stamp a stored digest with RecipeV2.
//
// The package depends on nothing but the standard library and RFC 8785 JSON
// canonicalization; ledger records the digest (ledger.Effect.RequestDigest)
// without computing it.
package semantic
