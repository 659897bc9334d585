package runs

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/idemkit/idemkit/internal/clock"
)

// Retention of ended runs. A run store given a retention (MemRuns.Retention,
// DynamoRuns.Retention; 0, the default, keeps every run forever) stamps a
// run that reaches a terminal state (completed, failed, cancelled; a
// breached cap) with an expiry, Run.ExpiresAt = its end time + retention in
// whole seconds, in the same conditional write that makes it terminal: no
// extra round trip, and never on a live run (pending, running, parked),
// whose writes are all conditional on its status being live. On RunsTable
// the expiry is the TTL attribute expiresAt (epoch seconds, the name the
// other tables use): DynamoDB deletes the item some time after it (usually
// within days), and the executor's stream mapping, which passes INSERT
// records only, never sees the deletion. MemRuns drops an expired run when
// it is next read, through its injected clock.
//
// What else the run owns in RunsTable, and why each is kept or expires
// with the run:
//
//   - its node event log (node.started, …, cap.breached) and its version
//     history are attributes of the run's own item: they expire with it
//     and are never needed after it (GET /runs/{runId}/events of a run
//     that is gone is 404 as the run is).
//   - its links: Retries (the runs retrying a failed run) and RetryOf are
//     attributes of the runs' items; a retry names its failed run by id
//     only and never reads it again once created, and a fork copies what
//     it inherits from its source at creation, so a source that expires
//     first takes nothing a later run needs.
//   - the scope item of a run scope (CreateScoped) is kept: it is written
//     when its holder is live and never again when the holder ends (the
//     hold is released lazily), so an expiry stamped on it could only be
//     measured from the holder's start, and a run may stay live longer
//     than any bound, which would let a second run take a scope its live
//     holder still holds. It is one small item per scope the tenant ever
//     used, overwritten by each takeover. A holder that has expired reads
//     as missing: the next create of the scope takes it over as from an
//     interrupted create (ScopeHoldGrace long passed), fencing the
//     expired run's id with a tombstone.
//   - tombstones (a runId fenced so that a late create of it cannot land)
//     are kept forever: a Layer-1 record may re-execute the create that
//     names the fenced id (ClaimRunID) for as long as the record is kept,
//     and under the commerce policy that is forever. They are tiny.
//
// A run's own item is the fence against its create running twice: while
// it exists, a re-execution of the Layer-1 record that created it
// (ClaimRunID names the same run) finds the id taken. A record whose
// executions keep failing after the run write is reclaimed, restarting
// its retention, for as long as its key is retried, so no retention bound
// makes that fence unnecessary: a run may expire only where it was written
// in the record's completion transaction (DynamoRuns.Transactional), after
// which the record only replays (kit refuses a retention elsewhere).

// attrExpiresAt is RunsTable's TTL attribute: epoch seconds, written only
// on an ended run of a store with a retention.
const attrExpiresAt = "expiresAt"

// expiry is when a run that ended at end expires under retention, in
// whole seconds (as the TTL attribute holds it); zero when retention is 0
// (keep forever).
func expiry(retention time.Duration, end time.Time) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return time.Unix(end.Add(retention).Unix(), 0).UTC()
}

// setExpiry adds SET expiresAt (the run's expiry, ending at end) to upd,
// unless retention is 0.
func setExpiry(upd expression.UpdateBuilder, retention time.Duration, end time.Time) expression.UpdateBuilder {
	if at := expiry(retention, end); !at.IsZero() {
		upd = upd.Set(expression.Name(attrExpiresAt), expression.Value(at.Unix()))
	}
	return upd
}

// expired reports whether r has passed its expiry at now (a run without
// one never expires). DynamoDB's TTL deletes an item whose expiry is at or
// before the current time, so expired does too.
func expired(r Run, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// lookupLocked returns the run id, called with m.mu held: a run past its
// expiry (by m.Now) is dropped and reads as missing, as DynamoDB's TTL
// deletes it.
func (m *MemRuns) lookupLocked(id string) (Run, bool) {
	r, ok := m.runs[id]
	if !ok {
		return Run{}, false
	}
	if expired(r, m.now()) {
		delete(m.runs, id)
		return Run{}, false
	}
	return r, true
}

// now is m.Now, or the system clock.
func (m *MemRuns) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return clock.System{}.Now()
}
