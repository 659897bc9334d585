package inbox

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
)

// Entry is a write refused because the record changed, since the version
// it was decided against, in what the write decides on
// (decided.StaleError): it waits in its caller's inbox to be decided again
// (resubmitted against a newer version, or discarded).
type Entry struct {
	// ID names the entry in its tenant's inbox (22 base64url characters).
	ID string `json:"id"`
	// Tenant is the caller's tenant (from the credential).
	Tenant string `json:"tenant"`
	// Caller is the caller within the tenant the write belongs to, an
	// opaque hash of the credential parts the Layer-1 policy scopes keys
	// by (the commerce policy's namespace and worker); "" when the policy
	// scopes by the tenant alone. Only that caller finds the entry.
	Caller string `json:"caller,omitempty"`
	// Operation is the refused write's operation id (the reference host's:
	// "cancelRun", "pauseRun" or "resumeRun"); RecordID the record it
	// writes (a runId).
	Operation string `json:"operation"`
	RecordID  string `json:"recordId"`
	// DecidedVersion is the version the write was decided against;
	// CurrentVersion the record's version when it was refused, the one to
	// decide against now; Changes the changed inputs then and now.
	DecidedVersion int64                 `json:"decidedVersion"`
	CurrentVersion int64                 `json:"currentVersion"`
	Changes        []decided.FieldChange `json:"changes"`
	// Reason is the refused write's reason as its request gave it (a
	// cancel's, a pause's or a resume's body reason), "" for none: a
	// resubmission runs the write with it, so what the run records is
	// what the caller sent.
	Reason string `json:"reason,omitempty"`
	// DrainPolicy is a refused pause's drainPolicy as its request gave it
	// ("" for none, the default, and for every other operation): its
	// resubmission pauses with it.
	DrainPolicy string `json:"drainPolicy,omitempty"`
	// CreatedAt is when the write was refused (the latest refusal, for an
	// entry resubmitted and refused again).
	CreatedAt time.Time `json:"createdAt"`

	// State is where the entry is in its decision (Waiting for an entry
	// kept and not yet decided). Not part of the entry's wire form.
	State State `json:"-"`
	// By names the decision that holds or decided the entry ("" while it
	// waits): the by of the Store.Decide that won it.
	By string `json:"-"`
	// DecidedAt is when that decision was made (zero while it waits).
	DecidedAt time.Time `json:"-"`
}

// State is an entry's place in its decision.
type State string

// The states of an entry. Waiting is the only one a decision starts from;
// Discarded and Resubmitted are final.
const (
	// Waiting: kept, not yet decided (GET /inbox lists it).
	Waiting State = "waiting"
	// Resubmitting: a resubmission holds the entry while its write runs
	// (still listed); only that resubmission moves it on, to Resubmitted,
	// or back to Waiting when the write is refused again (Store.Keep).
	Resubmitting State = "resubmitting"
	// Resubmitted: the write was decided again and ran (or was moot); no
	// longer listed.
	Resubmitted State = "resubmitted"
	// Discarded: the write was dropped and never runs; no longer listed.
	Discarded State = "discarded"
)

// Final reports whether s is a decision nothing changes any more.
func (s State) Final() bool { return s == Resubmitted || s == Discarded }

// Listed reports whether an entry in s is still in the inbox (listed):
// waiting, or held by a resubmission that has not finished.
func (s State) Listed() bool { return s == Waiting || s == Resubmitting }

// ErrNotFound is returned when the tenant's inbox has no entry with the id
// (another tenant's entries are never found).
var ErrNotFound = errors.New("inbox: entry not found")

// ErrDecided matches a *DecidedError: the entry is held or was decided by
// another decision.
var ErrDecided = errors.New("inbox: entry decided by another decision")

// ErrFull is Keep's error when the tenant's inbox cannot hold the entry:
// the Dynamo store's one item per tenant has reached DynamoDB's 400 KB
// item limit. Nothing was written; the entries waiting are unchanged.
var ErrFull = errors.New("inbox: the inbox is full")

// DecidedError is the answer of a Store.Decide or Store.Keep that lost the
// entry's compare-and-set: Entry is the entry as stored, its State and By
// saying what happened to it. It matches ErrDecided.
type DecidedError struct{ Entry Entry }

func (e *DecidedError) Error() string {
	return fmt.Sprintf("inbox: entry %s is %s by another decision", e.Entry.ID, e.Entry.State)
}

// Is makes a *DecidedError match ErrDecided.
func (e *DecidedError) Is(target error) bool { return target == ErrDecided }

// EntryID names the inbox entry of a write refused under a Layer-1 claim:
// 22 base64url characters of SHA-256("idemkit:inbox:v1\0" claimID "\0"
// originalRequestID), so every execution of one idempotency record (a
// reclaim included) keeps the same entry. Outside a claim (a write without
// a key) the id is random.
func EntryID(claim idem.ClaimInfo, claimed bool) string {
	if claimed && claim.ID != "" {
		return digest("idemkit:inbox:v1\x00" + claim.ID + "\x00" + claim.OriginalRequestID)
	}
	return random()
}

// DecisionBy names the decision a request makes on an entry (Store.Decide's
// by): under a Layer-1 claim 22 base64url characters of
// SHA-256("idemkit:inbox-decision:v1\0" claimID), the same for every
// execution of one idempotency record, so a retry with the same
// Idempotency-Key is the same decision; outside a claim a random one.
func DecisionBy(claim idem.ClaimInfo, claimed bool) string {
	if claimed && claim.ID != "" {
		return digest("idemkit:inbox-decision:v1\x00" + claim.ID)
	}
	return random()
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

func random() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic("inbox: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidEntryID reports whether id has the shape EntryID mints (22
// base64url characters); a path id of another shape names no entry.
func ValidEntryID(id string) bool {
	if len(id) != 22 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}

// sortEntries orders entries oldest first (CreatedAt, then ID).
func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].CreatedAt.Equal(es[j].CreatedAt) {
			return es[i].CreatedAt.Before(es[j].CreatedAt)
		}
		return es[i].ID < es[j].ID
	})
}
