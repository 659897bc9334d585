// Package memstore is an in-memory fence.Store: linearizable within one
// process (one mutex), for tests, examples and embedding. Proven by
// fencetest.Run.
package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/idemkit/idemkit/ledger/fence"
)

// Store is an in-memory fence.Store. The zero value is not usable; use New.
type Store struct {
	mu    sync.Mutex
	items map[string]*fence.Item
}

var _ fence.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store { return &Store{items: map[string]*fence.Item{}} }

func clone(it *fence.Item) *fence.Item {
	if it == nil {
		return nil
	}
	c := *it
	if it.Passed != nil {
		p := *it.Passed
		c.Passed = &p
	}
	return &c
}

// Acquire implements fence.Store.
func (s *Store) Acquire(ctx context.Context, effectID string, seed uint64, now, expires time.Time) (uint64, *fence.Passed, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.items[effectID]
	if it == nil {
		it = &fence.Item{EffectID: effectID, Token: seed}
		s.items[effectID] = it
	} else if it.Passed != nil && now.Before(it.ExpiresAt) {
		if expires.After(it.ExpiresAt) {
			it.ExpiresAt = expires
		}
		p := *it.Passed
		return 0, &p, nil
	}
	it.Passed = nil
	it.Token++
	it.ExpiresAt = expires
	return it.Token, nil, nil
}

// Pass implements fence.Store.
func (s *Store) Pass(ctx context.Context, effectID string, token uint64, region string, now time.Time) (bool, *fence.Item, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.items[effectID]
	if it == nil || it.Token != token || it.Passed != nil {
		if it != nil && it.Passed != nil && it.Passed.Token == token {
			return true, nil, nil // already passed by this very token
		}
		return false, clone(it), nil
	}
	it.Passed = &fence.Passed{Token: token, Region: region, At: now}
	return true, nil, nil
}

// Reopen implements fence.Store.
func (s *Store) Reopen(ctx context.Context, effectID string, token uint64) (bool, *fence.Item, error) {
	if err := ctx.Err(); err != nil {
		return false, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.items[effectID]
	if it == nil {
		return true, nil, nil
	}
	if it.Passed == nil {
		if it.Token == token {
			it.Token++ // retired before it passed: its late Pass is refused
		}
		return true, nil, nil
	}
	if it.Passed.Token != token {
		return false, clone(it), nil
	}
	it.Passed = nil
	it.Token++ // retires the reopened token: a late Pass of it is refused
	return true, nil, nil
}

// Keep implements fence.Store.
func (s *Store) Keep(ctx context.Context, effectID string, token uint64, now, expires time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	it := s.items[effectID]
	if it == nil || it.Token != token || !now.Before(it.ExpiresAt) {
		return false, nil
	}
	if expires.After(it.ExpiresAt) {
		it.ExpiresAt = expires
	}
	return true, nil
}

// Get implements fence.Store.
func (s *Store) Get(ctx context.Context, effectID string) (*fence.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.items[effectID]), nil
}

// Delete removes effectID's item, as TTL or the sweeper would after its
// retention. For tests of token monotonicity across deletion.
func (s *Store) Delete(effectID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.items, effectID)
}
