// Package dynamostore is the DynamoDB idem.Store, the only place Layer 1
// uses the AWS SDK. It passes the idem/idemtest conformance suite against
// DynamoDB Local, moto and dynalite (see internal/dynamotest).
//
// # Table
//
// The table is template.yaml's IdempotencyTable: partition key pk (S), TTL
// attribute expiresAt (none in a multi-region deployment whose records are
// decided in one home region: there a sweeper in that region deletes the
// expired items, conditionally, since TTL deletes in every replica and
// those deletes replicate). One item per record; pk is keyspace.ID's hash, the
// raw Idempotency-Key is never stored. Times are Unix milliseconds;
// expiresAtMs is the exact retention end and expiresAt (epoch seconds,
// rounded up) is set whenever retention is finite and removed when it is not.
// DynamoDB's TTL sweep is lazy (up to days), so expiry is part of every
// condition: an expired item is treated as absent.
//
// # Guarantees and round trips
//
//   - Claim: one PutItem conditional on "absent or expired". Of any number of
//     concurrent claims of one record exactly one wins. When the condition
//     fails the server returns the stored item
//     (ReturnValuesOnConditionCheckFailure=ALL_OLD), so a replay or an
//     in-flight answer costs ONE round trip; where the server does not return
//     it (dynalite, the DynamoDB Local idemkit pins) a strongly consistent GetItem
//     follows (two). A retryable-failure record, or a pending one whose lease
//     ended, with the same digest, is taken over by an UpdateItem
//     compare-and-set on (owner, attempt, state): exactly one reclaimer wins.
//   - Complete, Release, Renew, Delete: one conditional write each, fenced on
//     the owner token, the pending state and the expiry; a stale owner
//     writes nothing and gets idem.ErrFenced. A first execution therefore
//     costs two round trips (claim, complete).
//   - Transactional completion: Outcome.Writes of
//     types.TransactWriteItem (or pointers) commit in ONE TransactWriteItems
//     with the fenced completion (at most 99 writes, 4 MB in total, DynamoDB's
//     limits). If the fence fails nothing is written (idem.ErrFenced); if a
//     business write's own condition fails, an *idem.WriteConflictError
//     (idem.ErrWriteConflict) naming that write by its index in
//     Outcome.Writes (from the cancellation reasons, one per item; an
//     endpoint that gives another number of reasons cannot tell which item
//     failed, the fence included, and gets Index -1, never a guess). An
//     endpoint without transactions (dynalite) gets ErrNoTransactions: the
//     store never degrades to non-atomic writes.
//   - Responses up to idem.MaxResponseBytes (6 MB) are stored and replayed
//     byte-exactly: status, headers (values and order) and body are
//     serialised into one blob, deflated when that helps. The record item
//     stays within one write unit (1 KB by DynamoDB's item size): a blob
//     that fits beside the record's own attributes (about 600 bytes) is
//     stored inline (one attribute, resp, whose first byte names the
//     encoding); a larger one is split into chunk items of up to 350 KB
//     written (in parallel) before the completion under a key unique to
//     that completion and referenced by it; the reference is fenced like
//     the rest of the completion, a fenced or cancelled completion deletes its chunks,
//     and chunk items carry the record's TTL. Reading a chunked response
//     adds one strongly consistent BatchGetItem (repeated for unprocessed
//     keys); its length and SHA-256 are verified, and a chunk item gone
//     (an engine lost it, or its TTL deletion came first) is
//     idem.ErrNotKept: the Guard answers 410, never runs the handler
//     again, and never makes an answer up. Records written by
//     earlier versions (a blob of up to 350 KB inline, tagged, or with
//     respEnc, respLen and respSha attributes) are read as before; records
//     written by this version are read by earlier ones too (they already
//     read chunked responses), except a not-kept one. The headers have 1 MB
//     of room beside the body: a response whose blob (before deflating)
//     would be larger is refused with idem.ErrTooLarge, nothing written,
//     and the Guard records it as not kept.
//   - A not-kept outcome (idem.Response.NotKept: a response larger than
//     idem.MaxResponseBytes) is its status and size in a few bytes, inline
//     (resp starts with 'N'): its completion and its replays cost what a
//     small response's do, whatever the size that was not kept. A version
//     before it reads such a record as corrupt (an error, never a re-run).
//
// # What a request is billed
//
// DynamoDB bills a write by item size even when its condition fails, and
// AWS's guide has stated which item two ways (the existing item; the larger
// of the existing and the new item). Because the record item stays within
// 1 KB, under either reading: a replay, an in-flight answer and a mismatch
// are one write unit (the failed claim), a replay plus one consistent read
// unit per started 4 KB of each chunk item holding a response above about
// 600 bytes (one more call: the trade for not paying the response's size
// on every retry); a first execution two write units plus the response's
// own chunk items, once. A mismatch never reads the response. The units
// are pinned per case and size by TestCostPerCaseAndSize, and
// docs/PERFORMANCE.md has the table with prices.
//
// # Item weight
//
// The claim is one PutItem of the pending item, which carries no raw-body
// hash (rawBodySha256): the write that ends the attempt stores it, under
// a policy that keeps one (idem.Policy.KeepRawBodyHash: the ERP policy;
// the other presets keep none) (the completion's item, or the release's
// UpdateItem), so a failed claim (a
// replay, an in-flight answer, a mismatch) sends none and the Guard never
// hashes the raw body for one; a reclaim leaves the previous attempt's in
// place until its own attempt ends. A completion is one PutItem
// of the whole completed item, under a flat precomputed condition (owner,
// pending, unexpired), built from the record Claim returned (which
// idem.Store.Complete receives) with the outcome's state, retention and
// response: on the emulators a conditional PutItem of the item costs less
// than an UpdateItem of a few of its attributes. Nothing is written that no
// decision reads (the lease and the owner's liveness are dropped). See
// docs/PERFORMANCE.md for what each call costs in capacity units, and
// docs/performance-history.md for what each write shape costs the emulators.
//
// # SDK retries
//
// The client's retryer is used as configured. A retry can never cause a
// second execution: a throttled attempt was not applied, and a retried write
// whose earlier attempt was applied (response lost) fails its condition. The
// store then inspects the returned item, and only when the call really sent
// more than one request: if it holds the call's own owner token (and, for a
// completion, the same state and response), the write is reported
// as done (a claim as Claimed/Reclaimed), never as a duplicate or a fence.
// Owner tokens must therefore be unique per Claim call. A write whose every
// attempt lost its response returns an error; the record then stays as the
// server has it (for a claim: pending under the caller's token until the
// lease ends, then reclaimable).
//
// # Benchmarks
//
// go test -run '^$' -bench BenchmarkStore -benchmem -benchtime 2s
// ./idem/dynamostore/ (loopback emulators; client plus emulator time, not
// DynamoDB latency), 4 December 2026 15:28-15:29 UTC, on 2 vCPUs shared
// with other sessions, load average 5.5-6.1, so upper bounds:
//
//	                    DynamoDB Local   moto      dynalite
//	ClaimComplete       12.6 ms          17.3 ms   3.3 ms
//	Replay              5.2 ms           7.3 ms    1.7 ms
//	Replay, 1 MB body   33.4 ms          55.2 ms   66.2 ms
//
// A replay is two round trips on DynamoDB Local and dynalite (no ALL_OLD),
// one on moto; the 1 MB body is read in chunks. An earlier run, date and
// load not recorded, gave moto 7.3, 1.9 and 23.8 ms and dynalite 3.0, 1.1
// and 20.3 ms. moto is reached through dynamotest's serializing proxy;
// round trips, not milliseconds, are the contract, and the conformance
// suite asserts them.
package dynamostore
