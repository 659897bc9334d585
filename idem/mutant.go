//go:build !idemkit_mutant_replay_mismatch

package idem

import "context"

// mutantRecord is the soak's mutation point, inert in every real build: a
// request whose payload differs from the record's is a mismatch. The soak's
// mutation lane builds with the tag idemkit_mutant_replay_mismatch, whose
// mutantRecord answers it with the record's replay instead (a broken build
// the soak's linearizability check must report as Illegal).
func mutantRecord(context.Context, *txn, Record) (Record, bool) { return Record{}, false }
