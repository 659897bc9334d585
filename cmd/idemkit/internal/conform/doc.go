// Package conform is the black-box checker behind `idemkit conform URL`: it
// drives any HTTP API over the network and reports, scenario by scenario,
// whether the API's Layer-1 behaviour (Idempotency-Key) follows one policy:
// the OpenWOP rules (profile "openwop", the default), the commerce policy
// (profile "commerce") or the ERP policy (profile "erp"). Each scenario checks one rule of the policy and is named in
// its PASS/FAIL line; ScenariosFor lists a profile's.
//
// The OpenWOP scenarios, in order:
//
//	key-grammar            keys inside the grammar are accepted, keys outside it get 400
//	replay-marker          a same-key repeat is the cached answer, byte-exact, with the replay marker
//	mismatch               a same-key request with a different body gets 409 idempotency_key_mismatch, never the cached body
//	in-flight              a duplicate of a request in progress gets 409 idempotency_in_flight with Retry-After, or waits (bounded) for the winner's answer; the work runs once
//	get-ignores-key        GET does not honour Idempotency-Key
//	tenant-isolation       the same key under two API keys (tenants) names two records (needs two API keys)
//	validation-not-cached  a 400 validation_error is not cached: a same-key retry with a valid body runs
//
// The commerce policy's: key-grammar (1..255 characters, non-ASCII
// allowed), key-comma, replay-marker (Idempotent-Replayed), input-mismatch
// and operation-mismatch (409 idempotency-mismatch), in-flight (sync: waits
// or is told to come back with the pending action, never 409),
// sync-pending-action (a sync duplicate past its wait budget gets the
// pending action, 202 with Retry-After, and any Action it names exists
// and is the first request's, read as pending-action reads it),
// in-flight-async (the pending
// action at once),
// pending-action (that answer is the pending Action: 2xx, not settled, the
// replay marker, Retry-After; it names no Action or the first request's,
// and one it names exists and is the first request's: a GET of its
// statusUrl, else of GetPath, reads it at once, while the first request
// may still run, and must answer the run by its id; a statusUrl must be on
// the API's origin), settled-replay
// (a replay after the Action settled is the Action in its final status, a
// failed one included with Config.FailedRunBody), retry-on-link (Action.retry
// links the new Action to the failed one by on; needs FailedRunBody),
// if-match-stale (GET's strong ETag; If-Match of a stale version refused,
// the current one not), inbox-private (the refused write is in the caller's
// inbox only: another worker gets 404), rejected-at-door (400 and 401 record nothing), failure-replayed (a 5xx is
// stored and replayed as failed), get-ignores-key, scope-namespace,
// scope-worker. That keys are held forever is not checkable from outside.
//
// The ERP policy's: key-grammar, key-whitespace, duplicate-keys,
// replay-marker, response-headers, payload-conflict, error-envelope,
// in-flight (409 IDEMPOTENCY_REQUEST_IN_PROGRESS with Retry-After: 2, never
// held), scope-route, scope-client, scope-company, scope-organization,
// failed-retryable, test-route, get-ignores-key, validation-not-cached,
// live-route (JSON and XML bodies of one work order under one key replay),
// xml-replay (a JSON original replayed in XML for Accept: application/xml),
// work-order-strict (what the contract does not define is a 400, never
// another work order's replay; codes upper-cased by ASCII rules only),
// xml-error-answer (the route's refusal in XML keeps its request id, key
// echo and replay headers),
// request-id-everywhere (X-Request-ID and request_id on 401, 404, 405, 415;
// it says whether the 401 was the host's own or API Gateway's, whose
// authorizer answers before the function runs).
//
// A scope-PART scenario needs a credential that differs from the first API
// key in that part only (Config.ScopeKeys); without it it is skipped.
//
// Every scenario uses fresh random keys, so a run leaves the API's own data
// untouched apart from the resources the scenarios create. The checker never
// retries a request: it has to see every answer. A scenario whose verdict
// needs a duplicate to reach the API while a slow first request runs
// (in-flight; the commerce policy's sync-pending-action, in-flight-async and
// pending-action) tries again, with a new key, up to three times, when what
// it saw is only what a duplicate that arrived late shows: on a loaded
// machine a duplicate sent while the first request runs may reach the API
// after it finished (then a held duplicate and a late one get the same
// replay), or its answer reach the checker after the first one's. The
// verdict then says which try gave it; an API that holds every duplicate
// fails on every try, and a duplicate answered with another resource than
// the first request's fails at once, whenever it came (a second
// execution is never tried again).
//
// Its defaults fit `idemkit dev`: POST /runs with
// {"workflowId":"conformance-noop","inputs":{}}, a slow duplicate through the
// conformance-delay workflow, a failing action through
// conformance-unavailable, POST /runs/{runId}/cancel as the other operation,
// and GET /runs/{runId}.
package conform
