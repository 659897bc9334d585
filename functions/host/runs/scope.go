package runs

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// A run scope is the (tenant, scopeId) pair a createRun with
// `OpenWOP-Dedup: enforce` names: while one run of the pair is live
// (pending or running), no other run is created for it
// (RunStore.CreateScoped). The hold is released lazily: nothing is written
// when the holder ends; the next create of the scope finds the holder
// ended and takes the scope over with a compare-and-set naming that
// holder. A retry (POST /runs/{runId}/retry) and a fork
// (POST /runs/{runId}:fork) are not createRun: they never carry or hold
// their source run's scope.

// MaxScopeIDBytes bounds a scopeId: at most 256 bytes of UTF-8.
const MaxScopeIDBytes = 256

// ScopeRetryAfter is the Retry-After of the 409 run_already_active answer
// to a create refused because its scope is held: a fixed 5 seconds (a run
// usually lives longer than a client should wait between polls).
const ScopeRetryAfter = 5 * time.Second

// ScopeHoldGrace is how long a scope may stay held by a run that does not
// exist (its create was interrupted between taking the scope and writing
// the run) before another create of the scope may take it over: 15
// minutes, the longest a Lambda invocation runs. A takeover fences the
// interrupted create (it can no longer write its run), so the grace only
// decides when a scope held by a run that was never written is freed,
// never whether two runs hold it. It is measured from the holder's
// createdAt (its host's clock) to the taking create's createdAt (its
// host's clock: apifn's injected clock), so a skew or jump between the two
// clocks shortens or lengthens the wait by as much, and only that.
const ScopeHoldGrace = 15 * time.Minute

// ErrScopeHeld is returned (as a *ScopeHeldError) by CreateScoped when a
// live run of the tenant holds the scope: nothing was written.
var ErrScopeHeld = errors.New("host: run scope held by a live run")

// ErrBadScope is returned by CreateScoped for a scopeId that is empty,
// longer than MaxScopeIDBytes or not valid UTF-8.
var ErrBadScope = errors.New("host: malformed scopeId")

// ScopeHeldError is ErrScopeHeld with the holder's runId (never "").
// Unwritten is true when the holder's run is not (yet) written:
// its create is under way, or was interrupted less than ScopeHoldGrace
// ago.
type ScopeHeldError struct {
	Holder    string
	Unwritten bool
}

func (e *ScopeHeldError) Error() string {
	return fmt.Sprintf("host: run scope held by live run %s", e.Holder)
}

// Is makes a *ScopeHeldError match ErrScopeHeld.
func (e *ScopeHeldError) Is(target error) bool { return target == ErrScopeHeld }

// ValidScopeID reports whether s is an acceptable scopeId: 1 to
// MaxScopeIDBytes bytes of valid UTF-8.
func ValidScopeID(s string) bool {
	return s != "" && len(s) <= MaxScopeIDBytes && utf8.ValidString(s)
}

// scopeKey is the pk of a scope's item in RunsTable: "#scope/v1/" and the
// base64url SHA-256 of the tenant and scopeId (NUL-separated; a tenant
// never contains NUL). It starts with "#", so it is never a runId nor read
// as a run, and it is not any other "#" item's key (those name their kind
// first, e.g. "#inbox/"). The tenant is part of the hash: one tenant's
// scopeId never names another tenant's scope.
func scopeKey(tenant, scopeID string) string {
	h := sha256.New()
	h.Write([]byte("idemkit:run-scope:v1\x00"))
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(scopeID))
	return itemPrefix + "scope/v1/" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// checkScoped validates a CreateScoped call.
func checkScoped(r Run, scopeID string) error {
	if err := checkNew(r); err != nil {
		return err
	}
	if !ValidScopeID(scopeID) {
		return ErrBadScope
	}
	return nil
}

// memScope is MemRuns' hold of one scope: its holder and heldSince (the
// holder's createdAt), as DynamoRuns' scope item keeps them.
type memScope struct {
	holder string
	since  time.Time
}

// CreateScoped implements RunStore: under the store's lock, the scope is
// taken for r (free, held by r itself, or held by an ended or missing run)
// and r inserted, or nothing happens. A holder that is missing (its run
// expired under the store's retention) is taken over as DynamoRuns takes
// one over: once its hold is ScopeHoldGrace old, fencing its id (the
// takeover's tombstone: the id is never created again, Create is
// ErrRunExists and CreateScoped *ScopeHeldError); a fenced holder at once.
func (m *MemRuns) CreateScoped(_ context.Context, r Run, scopeID string) error {
	if err := checkScoped(r, scopeID); err != nil {
		return err
	}
	key := scopeKey(r.Tenant, scopeID)
	m.mu.Lock()
	if _, ok := m.lookupLocked(r.ID); ok {
		// r was written already (a re-execution of the create whose
		// Layer-1 completion was lost): its run is the answer, whoever
		// holds the scope now.
		m.mu.Unlock()
		return ErrRunExists
	}
	h, held := m.scopes[key]
	if held && h.holder != r.ID {
		hr, written := m.lookupLocked(h.holder)
		switch {
		case written && !hr.Status.Terminal():
			m.mu.Unlock()
			return &ScopeHeldError{Holder: h.holder}
		case written, m.fenced[h.holder]:
			// Ended, or fenced already: taken over below.
		case r.CreatedAt.Before(h.since.Add(ScopeHoldGrace)):
			m.mu.Unlock()
			return &ScopeHeldError{Holder: h.holder, Unwritten: true}
		default:
			// Missing (expired): fenced, as DynamoRuns' takeover writes
			// its tombstone, and taken over below.
			m.fenceLocked(h.holder)
		}
	}
	if m.fenced[r.ID] {
		// r's id was fenced by a takeover of its scope: its run can
		// never be written.
		holder := r.ID
		if held && h.holder != r.ID {
			holder = h.holder
		}
		m.mu.Unlock()
		return &ScopeHeldError{Holder: holder}
	}
	if m.scopes == nil {
		m.scopes = map[string]memScope{}
	}
	m.scopes[key] = memScope{holder: r.ID, since: r.CreatedAt}
	return m.createLocked(r)
}

// fenceLocked fences id (a takeover's tombstone), called with m.mu held:
// no run is ever created at id after.
func (m *MemRuns) fenceLocked(id string) {
	if m.fenced == nil {
		m.fenced = map[string]bool{}
	}
	m.fenced[id] = true
}

var (
	_ RunStore = (*MemRuns)(nil)
	_ RunStore = (*DynamoRuns)(nil)
)
