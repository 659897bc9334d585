// Package memstore is an in-memory idem.Store for tests, examples and
// single-process embedding. It passes the idem/idemtest conformance suite.
//
// Every method is atomic (one mutex) and works on deep copies, so callers can
// never alias stored records. It never reads a clock: the caller passes now.
// It also counts its calls per method, so tests can hold the middleware to
// its round-trip contract (replay = 1 store call, first execution = 2).
package memstore

import (
	"context"
	"fmt"
	"github.com/idemkit/idemkit/idem/keyspace"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// Store is an in-memory idem.Store. The zero value is not usable; use New.
type Store struct {
	mu    sync.Mutex
	recs  map[string]*entry
	items map[string][]byte
	calls map[string]int
}

var _ idem.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{recs: map[string]*entry{}, items: map[string][]byte{}, calls: map[string]int{}}
}

// Write is memstore's transactional business write (idem.Outcome.Writes):
// it sets Key to Value, or removes Key when Delete is set. With IfAbsent the
// write's own condition is that Key does not exist; when it fails the whole
// completion is cancelled with idem.ErrWriteConflict.
type Write struct {
	Key      string
	Value    []byte
	IfAbsent bool
	Delete   bool
}

// Item returns the business item written under key by a transactional
// completion.
func (s *Store) Item(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.items[key]
	return append([]byte(nil), v...), ok
}

// Calls returns the number of calls per method ("Claim", "Complete",
// "Release", "Renew", "Delete", "Get") since New or ResetCalls.
func (s *Store) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		m[k] = v
	}
	return m
}

// TotalCalls returns the total number of Store method calls.
func (s *Store) TotalCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.calls {
		n += v
	}
	return n
}

// ResetCalls zeroes the call counters.
func (s *Store) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
}

// Len returns the number of stored records, expired ones included (like
// DynamoDB before its lazy TTL sweep).
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// entry is one stored record: the record without its response, and the
// final response as the store keeps it. The map holds entries by
// pointer and every write changes its entry in place: a map of 208-byte
// slots (the entry by value) cleared and copied every slot each time it
// grew, and every write after the claim stored the whole entry again.
// The response is kept in the entry's own storage (room), so a record
// takes one allocation for the entry and one for its response body.
type entry struct {
	rec  idem.Record // Response is always nil
	resp *kept       // the final response (State.Final): &room, else nil
	room kept
}

// record returns the caller's copy of the record e holds.
func (e *entry) record() idem.Record {
	r := e.rec
	r.Response = e.resp.response()
	return r
}

// kept is a response as the store keeps it: its headers as a list rather
// than a map (a map costs every completion two allocations and its own
// work, and a map is made anyway for each copy handed out), with room
// for the headers and values of a typical response, so that keeping one
// takes two allocations (this and the body).
type kept struct {
	status  int
	notKept int  // Response.NotKept
	headers bool // the response had a header map (possibly empty)
	body    []byte
	hdrs    []keptHeader
	room    [4]keptHeader
	vals    [4]string
}

type keptHeader struct {
	name string
	vals []string
}

// keep copies r into k as the store keeps it and returns k; nil (k
// untouched) when r is nil.
func keep(k *kept, r *idem.Response) *kept {
	if r == nil {
		return nil
	}
	*k = kept{status: r.Status, notKept: r.NotKept, headers: r.Headers != nil, body: append([]byte(nil), r.Body...)}
	k.hdrs = k.room[:0]
	free := k.vals[:0:len(k.vals)]
	for name, v := range r.Headers {
		var c []string
		c, free = copyValues(v, free)
		k.hdrs = append(k.hdrs, keptHeader{name: name, vals: c})
	}
	return k
}

// copyValues returns a copy of v: in free's spare room when it fits (and
// free grown by it), else a slice of its own.
func copyValues(v, free []string) (c, rest []string) {
	if len(v) > 0 && len(v) <= cap(free)-len(free) {
		n := len(free)
		free = append(free, v...)
		return free[n:len(free):len(free)], free
	}
	return append([]string(nil), v...), free
}

// responseCopy is a copied response with room for the header values of a
// typical response, so that copying one takes one allocation fewer.
type responseCopy struct {
	resp   idem.Response
	values [4]string
}

// response returns a copy of the kept response that is the caller's (nil
// for none).
func (k *kept) response() *idem.Response {
	if k == nil {
		return nil
	}
	box := &responseCopy{}
	c := &box.resp
	*c = idem.Response{Status: k.status, NotKept: k.notKept, Body: append([]byte(nil), k.body...)}
	if k.headers {
		c.Headers = make(map[string][]string, len(k.hdrs))
		free := box.values[:0:len(box.values)]
		for _, h := range k.hdrs {
			c.Headers[h.name], free = copyValues(h.vals, free)
		}
	}
	return c
}

// live returns the unexpired record under id, nil for none (caller
// holds mu).
func (s *Store) live(id string, now time.Time) *entry {
	e := s.recs[id]
	if e == nil || e.rec.Expired(now) {
		return nil
	}
	return e
}

// owned returns the live pending record under id owned by owner, or
// idem.ErrFenced (caller holds mu).
func (s *Store) owned(id, owner string, now time.Time) (*entry, error) {
	e := s.live(id, now)
	if e == nil || e.rec.State != idem.StatePending || e.rec.Owner != owner || owner == "" {
		return nil, idem.ErrFenced
	}
	return e, nil
}

func msec(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Millisecond)
}

// Claim implements idem.Store.
func (s *Store) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return idem.ClaimResult{}, err
	}
	if !keyspace.IsCaller(rec.ID) || rec.Digest == "" || rec.Owner == "" || rec.State != idem.StatePending {
		return idem.ClaimResult{}, fmt.Errorf("%w: id %q, state %q, owner/digest set: %t/%t",
			idem.ErrInvalidRecord, rec.ID, rec.State, rec.Owner != "", rec.Digest != "")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["Claim"]++
	rec.Response = nil
	rec.RawBodySHA256 = "" // written by the write that ends the attempt
	rec.LeaseExpires = msec(rec.LeaseExpires)
	rec.Renewed = msec(now)
	rec.Expires = msec(rec.Expires)
	old := s.live(rec.ID, now)
	switch {
	case old == nil:
		rec.Attempt = 1
		s.recs[rec.ID] = &entry{rec: rec}
		return idem.ClaimResult{Decision: idem.Claimed, Record: rec}, nil
	case old.rec.Reclaimable(rec.Digest, now):
		rec.Attempt = old.rec.Attempt + 1
		rec.RequestID = old.rec.RequestID
		rec.RawBodySHA256 = old.rec.RawBodySHA256 // the last ended attempt's, until this one ends
		leaseExpired := old.rec.State == idem.StatePending
		old.rec, old.resp = rec, nil
		return idem.ClaimResult{Decision: idem.Reclaimed, Record: rec, LeaseExpired: leaseExpired}, nil
	default:
		return idem.ClaimResult{Decision: idem.Exists, Record: old.record()}, nil
	}
}

// Complete implements idem.Store. Outcome.Writes must be Write or *Write
// values; they are applied atomically with the completion. The completed
// record is the stored one with the outcome and claim.RawBodySHA256 applied
// (claim is checked, not copied: it is what Claim returned, so it holds the
// same attributes).
func (s *Store) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := out.Validate(); err != nil {
		return err
	}
	writes := make([]Write, 0, len(out.Writes))
	for _, w := range out.Writes {
		switch w := w.(type) {
		case Write:
			writes = append(writes, w)
		case *Write:
			writes = append(writes, *w)
		default:
			return fmt.Errorf("%w: %T", idem.ErrUnsupportedWrite, w)
		}
	}
	id, owner := claim.ID, claim.Owner
	if keyspace.IsCaller(id) && owner != "" { // otherwise ownedWrite fences it, as dynamostore does
		if err := claim.ValidateClaim(); err != nil {
			return err
		}
	}
	return s.ownedWrite(ctx, "Complete", id, owner, now, func(e *entry) error {
		return s.complete(e, claim.RawBodySHA256, out, writes)
	})
}

// complete writes the outcome out, the attempt's raw body hash rawSHA256
// and the outcome's writes onto e, all or (ErrWriteConflict) nothing.
func (s *Store) complete(e *entry, rawSHA256 string, out idem.Outcome, writes []Write) error {
	for _, w := range writes {
		if _, exists := s.items[w.Key]; w.IfAbsent && exists {
			return fmt.Errorf("%w: item %q exists", idem.ErrWriteConflict, w.Key)
		}
	}
	for _, w := range writes {
		if w.Delete {
			delete(s.items, w.Key)
		} else {
			s.items[w.Key] = append([]byte(nil), w.Value...)
		}
	}
	e.rec.RawBodySHA256 = rawSHA256
	e.rec.State = out.State
	e.rec.LeaseExpires = time.Time{}
	e.rec.Renewed = time.Time{}
	e.rec.Expires = msec(out.Expires)
	e.resp = nil
	if out.State.Final() {
		e.resp = keep(&e.room, out.Response)
	}
	return nil
}

// Release implements idem.Store.
func (s *Store) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	return s.ownedWrite(ctx, "Release", claim.ID, claim.Owner, now, func(e *entry) error {
		e.rec.State = idem.StateRetryableFailure
		e.rec.RawBodySHA256 = claim.RawBodySHA256
		e.rec.LeaseExpires = time.Time{}
		e.rec.Renewed = time.Time{}
		e.resp = nil
		return nil
	})
}

// Renew implements idem.Store.
func (s *Store) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	return s.ownedWrite(ctx, "Renew", id, owner, now, func(e *entry) error {
		e.rec.LeaseExpires = msec(leaseExpires)
		e.rec.Renewed = msec(now)
		return nil
	})
}

// Delete implements idem.Store.
func (s *Store) Delete(ctx context.Context, id, owner string, now time.Time) error {
	return s.ownedWrite(ctx, "Delete", id, owner, now, func(*entry) error {
		delete(s.recs, id)
		return nil
	})
}

// ownedWrite is a write by owner to its own record id, counted as call:
// under the lock, ErrFenced unless owner holds id at now, else apply(the
// record) does the write in place (all of it, or nothing when it fails).
func (s *Store) ownedWrite(ctx context.Context, call, id, owner string, now time.Time, apply func(e *entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[call]++
	e, err := s.owned(id, owner, now)
	if err != nil {
		return err
	}
	return apply(e)
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["Get"]++
	e := s.live(id, now)
	if e == nil {
		return idem.Record{}, false, nil
	}
	return e.record(), true, nil
}
