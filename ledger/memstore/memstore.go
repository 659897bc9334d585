// Package memstore is an in-memory ledger.Store, for tests, examples and
// single-process embedding. It keeps the exact conditional semantics of the
// DynamoDB store (proven by ledgertest) but nothing survives the process.
// Like the DynamoDB emulators, it never deletes records past retention; every
// condition treats them as absent.
package memstore

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// Store is an in-memory ledger.Store. The zero value is not usable; use New.
// Safe for concurrent use: each operation is atomic under one mutex.
type Store struct {
	mu   sync.Mutex
	recs map[string]*ledger.Record
	refs map[string]map[string]time.Time // runID -> record key -> reference expiry
}

// New returns an empty Store.
func New() *Store {
	return &Store{recs: map[string]*ledger.Record{}, refs: map[string]map[string]time.Time{}}
}

var _ ledger.Store = (*Store)(nil)

// Create implements ledger.Store.
func (s *Store) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.recs[rec.Key]; ok && cur.Live(now) {
		return false, cur.Clone(), nil
	}
	s.recs[rec.Key] = rec.Clone()
	return true, nil, nil
}

// Replace implements ledger.Store.
func (s *Store) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.recs[next.Key]
	if !ok {
		return false, nil, nil
	}
	if !cur.Live(now) || cur.Owner != want.Owner || cur.Attempt != want.Attempt || cur.State != want.State ||
		(want.LeaseExpired && cur.LeaseUntil.After(now)) ||
		(next.Fence > 0 && cur.Fence > next.Fence) {
		return false, cur.Clone(), nil
	}
	s.recs[next.Key] = next.Clone()
	return true, nil, nil
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recs[key].Clone(), nil
}

// AddRunRef implements ledger.Store.
func (s *Store) AddRunRef(ctx context.Context, key, runID string, expiresAt time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.refs[runID]
	if m == nil {
		m = map[string]time.Time{}
		s.refs[runID] = m
	}
	m[key] = expiresAt
	return nil
}

// ListByRun implements ledger.Store (ordered by key).
func (s *Store) ListByRun(ctx context.Context, runID string) ([]*ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*ledger.Record
	for _, r := range s.recs {
		if r.RunID != "" && r.RunID == runID {
			out = append(out, r.Clone())
		}
	}
	for key, exp := range s.refs[runID] {
		if r, ok := s.recs[key]; ok && r.RunID != runID && vouches(r, runID, exp) {
			out = append(out, r.Clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Scan implements ledger.Scanner (ordered by key).
func (s *Store) Scan(ctx context.Context, fn func(*ledger.Record) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	recs := make([]*ledger.Record, 0, len(s.recs))
	for _, r := range s.recs {
		recs = append(recs, r.Clone())
	}
	s.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].Key < recs[j].Key })
	for _, r := range recs {
		if !fn(r) {
			return nil
		}
	}
	return nil
}

var _ ledger.Scanner = (*Store)(nil)

// vouches reports whether a reference of runID expiring at exp lists r
// (ledger.Store.ListByRun): r holds an attempt of runID, or was created
// before exp (one created after it is a later effect under the same
// identity).
func vouches(r *ledger.Record, runID string, exp time.Time) bool {
	if r.CreatedAt.Before(exp) {
		return true
	}
	for _, a := range r.Attempts {
		if a.RunID == runID {
			return true
		}
	}
	return false
}
