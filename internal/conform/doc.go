// Package conform is the black-box checker behind `idemkit conform URL`: it
// drives any HTTP API over the network and reports, scenario by scenario,
// whether the API's Layer-1 behaviour (Idempotency-Key) follows the OpenWOP
// rules (profile "openwop", the default) or the ERP service's policy (profile
// "erp").
//
// The scenarios, in order (see Scenarios):
//
//	key-grammar            keys inside the grammar are accepted, keys outside it get 400
//	replay-marker          a same-key repeat is the cached answer, byte-exact, with the replay marker
//	mismatch               a same-key request with a different body gets 409 idempotency_key_mismatch, never the cached body
//	in-flight              a duplicate of a request in progress gets 409 idempotency_in_flight with Retry-After, or waits (bounded) for the winner's answer; the work runs once
//	get-ignores-key        GET does not honour Idempotency-Key
//	tenant-isolation       the same key under two API keys (tenants) names two records (needs two API keys)
//	validation-not-cached  a 400 validation_error is not cached: a same-key retry with a valid body runs
//
// Every scenario uses fresh random keys, so a run leaves the API's own data
// untouched apart from the resources the scenarios create. The checker never
// retries: it has to see every answer.
//
// Its defaults fit `idemkit dev`: POST /runs with
// {"workflowId":"conformance-noop","inputs":{}}, a slow duplicate through the
// conformance-delay workflow, and GET /runs/{runId}.
package conform
