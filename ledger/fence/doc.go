// Package fence makes effect issuance fenced: the "fenced-effects"
// multi-region posture of fenced cross-region effect ownership, on top of the Layer-2 ledger.
//
// A DynamoDB global table in its default (MREC) mode checks a condition only
// against the local replica and resolves concurrent writes last-writer-wins,
// so the ledger's insert-if-absent claim is not globally exclusive: during a
// partition two regions can both claim the same effect. Record
// reconciliation never authorises an effect. This package adds the missing
// linearizable step, from an Owner backed by a fence table that lives in ONE
// home region (or is an MRSC table):
//
//  1. Token (ledger.Fencer): before the fire mark, the executor takes a
//     monotonically increasing fencing token for the effect with one
//     conditional UpdateItem, refused once the effect has passed its point
//     of no return (*IssuedError);
//  2. the ledger writes its fire mark (local replica, conditional on the
//     owner and on the record's fence not being newer);
//  3. Pass (via Guard, the first thing the effect function does): the
//     point-of-no-return write, appended after the fence verdict and
//     immediately before the fire, conditional on "this token is still the
//     newest one issued for the effect AND no token passed before". A stale
//     token is rejected (ErrStale), counted in
//     openwop.idempotency.stale_fence_rejections_total, and the effect is
//     not fired (the attempt is released as not sent).
//
// Guarantee: for one effect identity, at most one token at a time stands
// past the point of no return, and a pass is forgotten (Reopen) only for
// a token whose attempt did not reach the provider: the attempt ended
// released as not sent, or an operator resolved it as not delivered. So at
// most one attempt, in any region, calls the provider; this holds under
// executor crashes, expired leases, clock skew and partitions, with both
// ways of reopening (model/effects.pml, checked by model/check.sh). The
// price is availability: an executor that cannot reach the fence owner
// does not fire, and an attempt that passed the point of no return and
// then crashed leaves the effect escaped (never re-fired automatically;
// Token refuses until an operator resolves it).
//
// The fence owner never uses a transaction, so an MRSC table (no
// transactions, no TTL) can hold it; the Sweeper in fence/dynamostore
// (internal/sweeper, run on a schedule by functions/sweeper) enforces
// retention there.
//
// Implementations of Store: fence/memstore and fence/dynamostore, both
// proven by fence/fencetest. This package never imports the AWS SDK.
package fence
