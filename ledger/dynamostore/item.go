package dynamostore

import (
	"github.com/idemkit/idemkit/ledger/identity"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// sortKey is the sort key of every record item: one item per effect (or
// slot), so a write never spans items.
const sortKey = "record"

// refPrefix starts the sort key of a run-reference item: pk is the record's
// key, sk "run#" + runId, runKey the referencing run (so the byRun index
// finds it). It holds no record data; ListByRun reads the record it names.
const refPrefix = "run#"

// refItem is a run reference (ledger.Store.AddRunRef).
type refItem struct {
	PK          string `dynamodbav:"pk"`
	SK          string `dynamodbav:"sk"`
	RunKey      string `dynamodbav:"runKey"`
	Kind        string `dynamodbav:"kind"`
	ExpiresAtMs int64  `dynamodbav:"expiresAtMs"`
	ExpiresAt   int64  `dynamodbav:"expiresAt"`
}

// kindRunRef is the kind attribute of a refItem.
const kindRunRef = "runref"

// item is the previous layout of a ledger.Record, one attribute per field
// and attempts a list of maps: records written by earlier versions are read
// through it (decode); the store writes the compact layout (packed.go),
// whose condition, index and TTL attributes have these same names. Times
// are Unix milliseconds, except expiresAt, the TTL attribute, in Unix
// seconds (rounded up); conditions use expiresAtMs.
type item struct {
	PK             string    `dynamodbav:"pk"`
	SK             string    `dynamodbav:"sk"`
	RunKey         string    `dynamodbav:"runKey,omitempty"` // byRun GSI; absent outside runs (sparse)
	Kind           string    `dynamodbav:"kind"`
	EffectID       string    `dynamodbav:"effectId,omitempty"`
	Tenant         string    `dynamodbav:"tenant,omitempty"`
	Keying         string    `dynamodbav:"keying,omitempty"`
	IdentityRecipe string    `dynamodbav:"identityRecipe,omitempty"`
	SemanticRecipe string    `dynamodbav:"semanticRecipe,omitempty"`
	RequestDigest  string    `dynamodbav:"requestDigest,omitempty"`
	ProviderKey    string    `dynamodbav:"providerKey,omitempty"`
	State          string    `dynamodbav:"state"`
	Owner          string    `dynamodbav:"owner"`
	Attempt        int       `dynamodbav:"attempt"`
	LeaseUntil     int64     `dynamodbav:"leaseUntil"`
	Fence          uint64    `dynamodbav:"fence"`
	Outcome        *outcome  `dynamodbav:"outcome,omitempty"`
	Attempts       []attempt `dynamodbav:"attempts"`
	MaxAttempts    int       `dynamodbav:"maxAttempts,omitempty"`
	Deadline       int64     `dynamodbav:"deadline,omitempty"`
	NotBefore      int64     `dynamodbav:"notBefore,omitempty"`
	CreatedAt      int64     `dynamodbav:"createdAt"`
	UpdatedAt      int64     `dynamodbav:"updatedAt"`
	ExpiresAtMs    int64     `dynamodbav:"expiresAtMs"`
	ExpiresAt      int64     `dynamodbav:"expiresAt"`
}

type outcome struct {
	OK       bool   `dynamodbav:"ok"`
	Value    []byte `dynamodbav:"value,omitempty"`
	Streamed bool   `dynamodbav:"streamed"`
	Error    string `dynamodbav:"error,omitempty"`
	Dropped  bool   `dynamodbav:"dropped,omitempty"`
	// BodyDigest and BodySize: a streamed body's metadata (never the body).
	BodyDigest string `dynamodbav:"bodyDigest,omitempty"`
	BodySize   int64  `dynamodbav:"bodySize,omitempty"`
}

type attempt struct {
	N            int    `dynamodbav:"n"`
	State        string `dynamodbav:"state"`
	At           int64  `dynamodbav:"at"`
	Fired        bool   `dynamodbav:"fired"`
	FiredAt      int64  `dynamodbav:"firedAt,omitempty"`
	RunID        string `dynamodbav:"runId,omitempty"`
	NodeID       string `dynamodbav:"nodeId,omitempty"`
	InvocationID string `dynamodbav:"invocationId,omitempty"`
	Operator     string `dynamodbav:"operator,omitempty"`
	Note         string `dynamodbav:"note,omitempty"`
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

// toItem is the previous layout of r (tests write such records).
func toItem(r *ledger.Record) item {
	it := item{
		PK: r.Key, SK: sortKey, RunKey: r.RunID, Kind: string(r.Kind), EffectID: r.EffectID, Tenant: r.Tenant,
		Keying: string(r.Keying), IdentityRecipe: r.IdentityRecipe, SemanticRecipe: r.SemanticRecipe,
		RequestDigest: r.RequestDigest, ProviderKey: r.ProviderKey, State: string(r.State), Owner: r.Owner,
		Attempt: r.Attempt, LeaseUntil: ms(r.LeaseUntil), Fence: r.Fence,
		CreatedAt: ms(r.CreatedAt), UpdatedAt: ms(r.UpdatedAt), ExpiresAtMs: ms(r.ExpiresAt),
		ExpiresAt:   (ms(r.ExpiresAt) + 999) / 1000,
		Attempts:    make([]attempt, 0, len(r.Attempts)),
		MaxAttempts: r.MaxAttempts,
	}
	if !r.Deadline.IsZero() {
		it.Deadline = ms(r.Deadline)
	}
	if !r.NotBefore.IsZero() {
		it.NotBefore = ms(r.NotBefore)
	}
	if o := r.Outcome; o != nil {
		it.Outcome = &outcome{OK: o.OK, Value: o.Value, Streamed: o.Streamed, Error: o.Error, Dropped: o.Dropped,
			BodyDigest: o.BodyDigest, BodySize: o.BodySize}
	}
	for _, a := range r.Attempts {
		at := attempt{N: a.N, State: string(a.State), At: ms(a.At), Fired: a.Fired,
			RunID: a.RunID, NodeID: a.NodeID, InvocationID: a.InvocationID, Operator: a.Operator, Note: a.Note}
		if !a.FiredAt.IsZero() {
			at.FiredAt = ms(a.FiredAt)
		}
		it.Attempts = append(it.Attempts, at)
	}
	return it
}

func (it *item) record() *ledger.Record {
	r := &ledger.Record{
		Key: it.PK, Kind: identity.Kind(it.Kind), EffectID: it.EffectID, Tenant: it.Tenant,
		Keying: identity.Keying(it.Keying), IdentityRecipe: it.IdentityRecipe, SemanticRecipe: it.SemanticRecipe,
		RequestDigest: it.RequestDigest, ProviderKey: it.ProviderKey, RunID: it.RunKey,
		State: ledger.State(it.State), Owner: it.Owner, Attempt: it.Attempt, LeaseUntil: fromMs(it.LeaseUntil),
		Fence: it.Fence, CreatedAt: fromMs(it.CreatedAt), UpdatedAt: fromMs(it.UpdatedAt), ExpiresAt: fromMs(it.ExpiresAtMs),
	}
	r.MaxAttempts = it.MaxAttempts
	if it.Deadline != 0 {
		r.Deadline = fromMs(it.Deadline)
	}
	if it.NotBefore != 0 {
		r.NotBefore = fromMs(it.NotBefore)
	}
	if o := it.Outcome; o != nil {
		r.Outcome = &ledger.Outcome{OK: o.OK, Value: o.Value, Streamed: o.Streamed, Error: o.Error, Dropped: o.Dropped,
			BodyDigest: o.BodyDigest, BodySize: o.BodySize}
	}
	for _, a := range it.Attempts {
		ra := ledger.Attempt{N: a.N, State: ledger.AttemptState(a.State), At: fromMs(a.At),
			Fired: a.Fired, RunID: a.RunID, NodeID: a.NodeID, InvocationID: a.InvocationID, Operator: a.Operator, Note: a.Note}
		if a.FiredAt != 0 {
			ra.FiredAt = fromMs(a.FiredAt)
		}
		r.Attempts = append(r.Attempts, ra)
	}
	return r
}
