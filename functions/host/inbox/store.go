package inbox

import (
	"context"
	"errors"
	"time"
)

// Store keeps refused offline writes per tenant and decides each entry by
// compare-and-set. Its consumer is the api handler (apifn); Mem and Dynamo
// implement it, and inboxtest.Run holds them to the same contract. A Store
// never reads a clock: the caller passes now.
type Store interface {
	// Keep stores e in e.Tenant's inbox as waiting, replacing an entry
	// with its id that is waiting (the same refused write refused again
	// keeps one entry) or that the resubmission by holds (a resubmission
	// refused again hands the entry back, updated). An entry decided, or
	// held by another resubmission, is left as it is: a *DecidedError.
	// by is "" for a write refused on its first submission. ErrFull when
	// the inbox cannot hold the entry (nothing written).
	Keep(ctx context.Context, e Entry, by string) error
	// List returns the tenant's listed entries (State.Listed: waiting and
	// resubmitting), oldest first; strongly consistent: an entry kept
	// before List is in it.
	List(ctx context.Context, tenant string) ([]Entry, error)
	// Get returns one of the tenant's entries in whatever state it is
	// (until a final one is forgotten, Config.Retention after its
	// decision), or ErrNotFound.
	Get(ctx context.Context, tenant, id string) (Entry, error)
	// Decide moves one of the tenant's entries to to (Resubmitting,
	// Resubmitted, Discarded or Waiting) for the decision by (non-empty),
	// a compare-and-set: Resubmitting and Discarded only from Waiting,
	// Resubmitted and Waiting only from Resubmitting held by by (to
	// Waiting hands the entry back as it was taken: a resubmission that
	// ran nothing, or whose updated entry Keep could not hold). Of any
	// number of decisions racing on one waiting entry exactly one wins. A
	// decision already by's (its retry: the entry is in to, or to is
	// Resubmitting and the entry is Resubmitted, by by; or to is Waiting
	// and the entry waits) succeeds again and changes nothing. A
	// decision never makes the entry's item larger than when the entry
	// was kept, so an inbox too full for Keep still decides. It returns the entry as stored afterwards; ErrNotFound when
	// there is none, a *DecidedError (ErrDecided) carrying the entry when
	// another decision holds or decided it. now stamps DecidedAt and
	// forgets the tenant's final entries decided Config.Retention before.
	Decide(ctx context.Context, tenant, id string, to State, by string, now time.Time) (Entry, error)
}

// Config is what both stores share.
type Config struct {
	// Retention is how long a final entry (discarded or resubmitted) is
	// remembered after its decision, so that a retry of the decision whose
	// answer was lost, and a decision that lost the race, are told what
	// happened; afterwards its id is unknown (404). Set it at least as long
	// as clients retry one Idempotency-Key. Default DefaultRetention.
	Retention time.Duration
	// MaxPerCaller is how many listed entries (waiting, or held by a
	// resubmission) one caller of a tenant may hold, so that one caller
	// cannot fill the inbox its tenant's other callers share: a new entry
	// past it is ErrFull (nothing written). Entries of the tenant-wide
	// caller ("", a policy that scopes by the tenant alone) take no share.
	// Default DefaultMaxPerCaller.
	MaxPerCaller int
}

// DefaultMaxPerCaller is Config.MaxPerCaller's default: 100, a tenth of
// what the Dynamo store's item holds.
const DefaultMaxPerCaller = 100

func (c Config) maxPerCaller() int {
	if c.MaxPerCaller <= 0 {
		return DefaultMaxPerCaller
	}
	return c.MaxPerCaller
}

// listedOf counts the listed entries of caller among es, but id's.
func listedOf(es []Entry, caller, id string) int {
	n := 0
	for _, e := range es {
		if e.Caller == caller && e.ID != id && e.State.Listed() {
			n++
		}
	}
	return n
}

// DefaultRetention is Config.Retention's default: 24 hours.
const DefaultRetention = 24 * time.Hour

func (c Config) retention() time.Duration {
	if c.Retention <= 0 {
		return DefaultRetention
	}
	return c.Retention
}

// errBadDecision is returned by Decide for a to it does not decide to or
// an empty by (a programming error).
var errBadDecision = errors.New("inbox: Decide needs to in {resubmitting, resubmitted, discarded, waiting} and a non-empty by")

func checkDecision(to State, by string) error {
	if by == "" || (to != Resubmitting && to != Resubmitted && to != Discarded && to != Waiting) {
		return errBadDecision
	}
	return nil
}

// again reports whether cur is already the decision to by by (a retry).
func again(cur Entry, to State, by string) bool {
	if to == Waiting {
		return cur.State == Waiting
	}
	return cur.By == by && (cur.State == to || to == Resubmitting && cur.State == Resubmitted)
}

// allowed reports whether an entry in cur may move to to for by: the
// compare both stores make (Dynamo as a condition expression).
func allowed(cur Entry, to State, by string) bool {
	switch to {
	case Resubmitting, Discarded:
		return cur.State == Waiting
	case Resubmitted, Waiting:
		return cur.State == Resubmitting && cur.By == by
	}
	return false
}

// keepable reports whether Keep may replace cur for by.
func keepable(cur Entry, by string) bool {
	return cur.State == Waiting || by != "" && cur.State == Resubmitting && cur.By == by
}
