package runs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
)

// itemPrefix starts the pk of every RunsTable item that is not a run (a
// caller's inbox): "#" is outside the runId grammar, so no runId is one,
// and RunFromItem (the executor's stream reader) skips them.
const itemPrefix = "#"

// InboxEntry is a write refused because the record changed, since the
// version it was decided against, in what the write decides on
// (decided.StaleError): it waits in its caller's inbox to be decided
// again (resubmitted against a newer version, or discarded).
type InboxEntry struct {
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
	// "cancelRun"); RecordID the record it writes (a runId).
	Operation string `json:"operation"`
	RecordID  string `json:"recordId"`
	// DecidedVersion is the version the write was decided against;
	// CurrentVersion the record's version when it was refused, the one to
	// decide against now; Changes the changed inputs then and now.
	DecidedVersion int64                 `json:"decidedVersion"`
	CurrentVersion int64                 `json:"currentVersion"`
	Changes        []decided.FieldChange `json:"changes"`
	// CreatedAt is when the write was refused (the latest refusal, for an
	// entry resubmitted and refused again).
	CreatedAt time.Time `json:"createdAt"`
}

// ErrInboxEntryNotFound is returned when the tenant's inbox has no entry
// with the id (another tenant's entries are never found).
var ErrInboxEntryNotFound = errors.New("host: inbox entry not found")

// Inbox keeps refused offline writes per tenant. Implementations: memInbox
// and dynamoInbox (one item per tenant in RunsTable).
type Inbox interface {
	// Keep stores e in e.Tenant's inbox, replacing an entry with its id
	// (the same refused write refused again keeps one entry).
	Keep(ctx context.Context, e InboxEntry) error
	// List returns the tenant's entries, oldest first (strongly
	// consistent: an entry kept before List is in it).
	List(ctx context.Context, tenant string) ([]InboxEntry, error)
	// Get returns one of the tenant's entries, or ErrInboxEntryNotFound.
	Get(ctx context.Context, tenant, id string) (InboxEntry, error)
	// Remove deletes one of the tenant's entries; ErrInboxEntryNotFound
	// when it is not there (already removed, or never the tenant's).
	Remove(ctx context.Context, tenant, id string) error
}

// InboxEntryID names the inbox entry of a write refused under a Layer-1
// claim: 22 base64url characters of SHA-256("idemkit:inbox:v1\0" claimID
// "\0" originalRequestID), so every execution of one idempotency record
// (a reclaim included) keeps the same entry. Outside a claim (a write
// without a key) the id is random.
func InboxEntryID(claim idem.ClaimInfo, claimed bool) string {
	var b []byte
	if claimed && claim.ID != "" {
		s := sha256.Sum256([]byte("idemkit:inbox:v1\x00" + claim.ID + "\x00" + claim.OriginalRequestID))
		b = s[:16]
	} else {
		b = make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			panic("host: no randomness: " + err.Error())
		}
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// InboxOf returns the inbox kept beside runs: the RunsTable inbox of a
// *DynamoRuns (dynamoInbox on its client and table), the memInbox of a
// *MemRuns (one per MemRuns), else a new memInbox.
func InboxOf(runs RunStore) Inbox {
	switch r := runs.(type) {
	case *DynamoRuns:
		return &dynamoInbox{Client: r.Client, Table: r.Table}
	case *MemRuns:
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.inbox == nil {
			r.inbox = newMemInbox()
		}
		return r.inbox
	}
	return newMemInbox()
}

// memInbox is an in-memory Inbox (tests, embedding), safe for concurrent
// use.
type memInbox struct {
	mu sync.Mutex
	m  map[string]map[string]InboxEntry // tenant -> id -> entry
}

// newMemInbox returns an empty memInbox.
func newMemInbox() *memInbox { return &memInbox{m: map[string]map[string]InboxEntry{}} }

// Keep implements Inbox.
func (m *memInbox) Keep(_ context.Context, e InboxEntry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m[e.Tenant] == nil {
		m.m[e.Tenant] = map[string]InboxEntry{}
	}
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Millisecond)
	m.m[e.Tenant][e.ID] = e
	return nil
}

// List implements Inbox.
func (m *memInbox) List(_ context.Context, tenant string) ([]InboxEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]InboxEntry, 0, len(m.m[tenant]))
	for _, e := range m.m[tenant] {
		out = append(out, e)
	}
	sortEntries(out)
	return out, nil
}

// Get implements Inbox.
func (m *memInbox) Get(_ context.Context, tenant, id string) (InboxEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[tenant][id]
	if !ok {
		return InboxEntry{}, ErrInboxEntryNotFound
	}
	return e, nil
}

// Remove implements Inbox.
func (m *memInbox) Remove(_ context.Context, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[tenant][id]; !ok {
		return ErrInboxEntryNotFound
	}
	delete(m.m[tenant], id)
	return nil
}

func sortEntries(es []InboxEntry) {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].CreatedAt.Equal(es[j].CreatedAt) {
			return es[i].CreatedAt.Before(es[j].CreatedAt)
		}
		return es[i].ID < es[j].ID
	})
}

// ValidInboxEntryID reports whether id has the shape InboxEntryID mints (22
// base64url characters); a path id of another shape names no entry.
func ValidInboxEntryID(id string) bool {
	if len(id) != 22 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil
}
