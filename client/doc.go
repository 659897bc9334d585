// Package client is the caller's side of idemkit's Layer 1: an
// http.RoundTripper (and a small Client around it) that makes mutating
// requests safe to retry.
//
// For each logical call to a mutating method (anything but GET, HEAD,
// OPTIONS, TRACE and CONNECT) the Transport:
//
//   - uses the caller's idempotency key when there is one (an
//     Idempotency-Key header already on the request, or a key put in the
//     context with WithKey, typically DeriveKey of the business event such as
//     a cart id), and otherwise mints one: NewKey, a random canonical UUIDv4
//     (the form OpenWOP names as meeting its 128-bit entropy requirement), or
//     with Config.NewKey = NewCompactKey a full 128 random bits as 22
//     base64url characters;
//   - sends that same key, and the same body, on every one of its attempts
//     (and, through Client.Do, on every hop of a 307/308 redirect to the
//     same origin; one to another origin is returned, not followed, and a
//     hop that makes the call a GET carries no key there); a body
//     without GetBody is read into memory once to be replayable;
//   - retries transport errors, 408 (RFC 9110 §15.5.9 invites a repeat), 429, 5xx
//     and 409 idempotency_in_flight (and
//     the commerce policy's in-flight answer: 202 marked
//     Idempotent-Replayed: true whose body is
//     {"status":"pending","requestId":…}, naming no action, unless the
//     request says Idempotency-Mode: async), with
//     exponential backoff and jitter, never sooner than Retry-After asks
//     (delay-seconds or an HTTP-date in GMT, RFC 9110 §10.2.3; a value
//     that is neither, a fractional second or another zone, is ignored); a
//     408, 429 or 5xx carrying a replay marker is final, since it is the server's
//     recorded outcome for the key, which a retry could only replay again
//     (a replayed 5xx or 409 whose body breaks off before its error code
//     is read never arrived whole, and is retried like a transport error),
//     and so is a server error whose code OpenWOP's error registry marks
//     not retriable (credential_unavailable, pack_load_failure,
//     event_type_unmapped, payload_unprojectable);
//   - never retries 409 idempotency_key_mismatch or any other 4xx but 408
//     and 429 (a 409
//     whose body breaks off before its error code is read never arrived
//     whole: it is retried like a transport error); an answer's error code
//     is read through the content codings the standard library reads
//     (gzip, deflate), so a compressed answer, which a caller that sets
//     its own Accept-Encoding receives as sent, is retried, polled or
//     final as the plain one is;
//   - stops after Config.MaxAttempts attempts or Config.MaxElapsed, whichever
//     comes first (through Client.Do, for all the hops of a redirect
//     together), and never waits past the request context's deadline; a
//     409 idempotency_in_flight (or that pending 202) with Retry-After is
//     a poll (the server is still running the request) and counts against
//     MaxElapsed only, so a first request that answers within the budget
//     is received;
//   - reports the key, the number of attempts and whether the answer was a
//     replay served from the server's idempotency cache (Result, WithResult,
//     Client.Do).
//
// Non-mutating requests pass through to the base transport untouched: no
// key, no retries.
//
// The guarantee is the server's: with a Layer-1 server (idemkit's idem
// package, or any OpenWOP host), every attempt of one logical call carries
// the same key and body, so the operation runs at most once however many
// attempts the Transport makes.
package client
