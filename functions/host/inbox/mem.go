package inbox

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Mem is an in-memory Store (tests, embedding, one process), safe for
// concurrent use.
type Mem struct {
	cfg Config
	mu  sync.Mutex
	m   map[string]map[string]Entry // tenant -> id -> entry
}

// NewMem returns an empty Mem.
func NewMem(cfg Config) *Mem { return &Mem{cfg: cfg, m: map[string]map[string]Entry{}} }

// Keep implements Store.
func (m *Mem) Keep(_ context.Context, e Entry, by string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.m[e.Tenant][e.ID]
	if ok && !keepable(cur, by) {
		return &DecidedError{Entry: cur}
	}
	if !ok && e.Caller != "" {
		es := make([]Entry, 0, len(m.m[e.Tenant]))
		for _, x := range m.m[e.Tenant] {
			es = append(es, x)
		}
		if n := listedOf(es, e.Caller, e.ID); n >= m.cfg.maxPerCaller() {
			return fmt.Errorf("%w: the caller holds %d waiting writes, its share", ErrFull, n)
		}
	}
	if m.m[e.Tenant] == nil {
		m.m[e.Tenant] = map[string]Entry{}
	}
	e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Millisecond)
	e.State, e.By, e.DecidedAt = Waiting, "", time.Time{}
	m.m[e.Tenant][e.ID] = e
	return nil
}

// List implements Store.
func (m *Mem) List(_ context.Context, tenant string) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Entry, 0, len(m.m[tenant]))
	for _, e := range m.m[tenant] {
		if e.State.Listed() {
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out, nil
}

// Get implements Store.
func (m *Mem) Get(_ context.Context, tenant, id string) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[tenant][id]
	if !ok {
		return Entry{}, ErrNotFound
	}
	return e, nil
}

// Decide implements Store.
func (m *Mem) Decide(_ context.Context, tenant, id string, to State, by string, now time.Time) (Entry, error) {
	if err := checkDecision(to, by); err != nil {
		return Entry{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.m[tenant][id]
	switch {
	case !ok:
		return Entry{}, ErrNotFound
	case again(cur, to, by):
		return cur, nil
	case !allowed(cur, to, by):
		return Entry{}, &DecidedError{Entry: cur}
	}
	cur.State, cur.By, cur.DecidedAt = to, by, now.UTC().Truncate(time.Millisecond)
	if to == Waiting {
		cur.By, cur.DecidedAt = "", time.Time{}
	}
	m.m[tenant][id] = cur
	cutoff := now.Add(-m.cfg.retention())
	for k, e := range m.m[tenant] {
		if e.State.Final() && e.DecidedAt.Before(cutoff) {
			delete(m.m[tenant], k)
		}
	}
	return cur, nil
}
