// Package inbox owns the reference host's inbox of offline decisions: the
// writes refused because the record they were decided against changed in
// what they decide on (decided.StaleError), kept per caller until they are
// decided again, resubmitted or discarded.
//
// An entry moves through its states by compare-and-set only (Store.Decide):
// waiting, then resubmitting (one resubmission holds it while the write
// runs) and resubmitted, or discarded. Exactly one decision wins an entry:
// once a discard has won, no resubmission runs the write; once a
// resubmission holds it, no discard is told it dropped the write. A
// decision is named by its maker (a token stable across the retries of one
// Idempotency-Key), so a retry whose first answer was lost finds its own
// decision again and answers as it would have.
//
// The Store has an in-memory implementation (Mem) and a DynamoDB one
// (Dynamo, one item per tenant in the RunsTable); both pass the
// conformance suite in inboxtest.
package inbox
