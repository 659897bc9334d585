//go:build idemkit_mutant_replay_mismatch

package idem

import "context"

// mutantRecord (see mutant.go; never built outside the soak's mutation
// lane) answers a request with another payload with the record's replay:
// it reads the whole record, response included, which a store may leave
// out of a mismatch's answer.
func mutantRecord(ctx context.Context, t *txn, cur Record) (Record, bool) {
	if full, found, err := t.g.cfg.Store.Get(ctx, t.id, t.g.clock.Now()); err == nil && found {
		return full, true
	}
	return cur, true
}
