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
	"github.com/idemkit/idemkit/internal/keyhash"
)

// Store is an in-memory idem.Store. The zero value is not usable; use New.
type Store struct {
	mu       sync.Mutex
	recs     map[string]*byte // by ID (a view of the record's own bytes), the record's first byte: record.go
	locs     []*time.Location // the locations of stored times other than UTC and Local
	locIx    map[*time.Location]uint32
	locsLive int // locations in use at the last compaction (compactLocs)
	spare    int // the room a claimed record is given for its completion
	items    map[string][]byte
	calls    map[string]int
}

var _ idem.Store = (*Store)(nil)

// New returns an empty Store.
func New() *Store {
	return &Store{recs: map[string]*byte{}, locIx: map[*time.Location]uint32{}, spare: firstSpare, items: map[string][]byte{}, calls: map[string]int{}}
}

// Write is memstore's transactional business write (idem.Outcome.Writes):
// it sets Key to Value, or removes Key when Delete is set. With IfAbsent the
// write's own condition is that Key does not exist; when it fails the whole
// completion is cancelled with an *idem.WriteConflictError naming the
// first such write (idem.ErrWriteConflict).
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

// live returns the unexpired record under id, nil for none (caller
// holds mu).
func (s *Store) live(id string, now time.Time) []byte {
	b := bytesAt(s.recs[id])
	if b == nil || s.expired(b, now) {
		return nil
	}
	return b
}

// owned returns the live pending record under id owned by owner, or
// idem.ErrFenced (caller holds mu).
func (s *Store) owned(id, owner string, now time.Time) ([]byte, error) {
	b := s.live(id, now)
	if b == nil || idem.State(str(b, sState)) != idem.StatePending || str(b, sOwner) != owner || owner == "" {
		return nil, idem.ErrFenced
	}
	return b, nil
}

// put stores the record r (its Response ignored) with resp as a new
// record slice (caller holds mu); extra is the room left at its end.
func (s *Store) put(r *idem.Record, resp *idem.Response, extra int) {
	b := s.encode(r, resp, extra)
	s.recs[str(b, sID)] = &b[0] // the key is now a view of b (a map updates a string key it assigns)
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
		return idem.ClaimResult{}, fmt.Errorf("%w: id %s (a caller ID: %t), state %q, owner/digest set: %t/%t",
			idem.ErrInvalidRecord, keyhash.Log(rec.ID), keyspace.IsCaller(rec.ID), rec.State, rec.Owner != "", rec.Digest != "")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["Claim"]++
	s.compactLocs()
	rec.Response = nil
	rec.RawBodySHA256 = "" // written by the write that ends the attempt
	rec.LeaseExpires = msec(rec.LeaseExpires)
	rec.Renewed = msec(now)
	rec.Expires = msec(rec.Expires)
	old := s.live(rec.ID, now)
	if old == nil {
		rec.Attempt = 1
		if err := tooLarge(&rec, nil); err != nil {
			return idem.ClaimResult{}, err
		}
		s.put(&rec, nil, s.spare)
		return idem.ClaimResult{Decision: idem.Claimed, Record: rec}, nil
	}
	o := s.head(old)
	if o.Reclaimable(rec.Digest, now) {
		rec.Attempt = o.Attempt + 1
		rec.RequestID = o.RequestID
		rec.RawBodySHA256 = o.RawBodySHA256 // the last ended attempt's, until this one ends
		leaseExpired := o.State == idem.StatePending
		if err := tooLarge(&rec, nil); err != nil {
			return idem.ClaimResult{}, err
		}
		s.put(&rec, nil, s.spare)
		return idem.ClaimResult{Decision: idem.Reclaimed, Record: rec, LeaseExpired: leaseExpired}, nil
	}
	o.Response = response(old)
	return idem.ClaimResult{Decision: idem.Exists, Record: o}, nil
}

// Complete implements idem.Store. Outcome.Writes must be Write or *Write
// values; they are applied atomically with the completion. The completed
// record is the stored one with the outcome and claim.RawBodySHA256 applied
// (claim is checked, not copied: it is what Claim returned, so it holds the
// same attributes). It writes nothing beside the record, so it never
// fails with idem.ErrRecordNotSent.
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
	return s.ownedWrite(ctx, "Complete", id, owner, now, func(b []byte) error {
		return s.complete(b, claim.RawBodySHA256, out, writes)
	})
}

// complete writes the outcome out, the attempt's raw body hash rawSHA256
// and the outcome's writes onto record b, all or (ErrWriteConflict)
// nothing: in place when the room at b's end holds what it adds.
func (s *Store) complete(b []byte, rawSHA256 string, out idem.Outcome, writes []Write) error {
	var resp *idem.Response
	if out.State.Final() {
		resp = out.Response
	}
	need := len(out.State) + len(rawSHA256) + responseLen(resp)
	if used(b)+need > maxRecord {
		return fmt.Errorf("%w: a record of more than %d bytes", idem.ErrTooLarge, maxRecord)
	}
	for i, w := range writes {
		if _, exists := s.items[w.Key]; w.IfAbsent && exists {
			return &idem.WriteConflictError{Index: i, Err: fmt.Errorf("item %q exists", w.Key)}
		}
	}
	for _, w := range writes {
		if w.Delete {
			delete(s.items, w.Key)
		} else {
			s.items[w.Key] = append([]byte(nil), w.Value...)
		}
	}
	r := s.head(b)
	r.RawBodySHA256 = rawSHA256
	r.State = out.State
	r.LeaseExpires = time.Time{}
	r.Renewed = time.Time{}
	r.Expires = msec(out.Expires)
	if need <= maxSpare {
		s.spare = need
	}
	if !room(b, need) {
		s.put(&r, resp, 0)
		return nil
	}
	appendRef(b, sState, string(r.State))
	appendRef(b, sRawBodySHA256, rawSHA256)
	s.setHead(b, &r)
	appendResponse(b, resp)
	return nil
}

// Release implements idem.Store.
func (s *Store) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	return s.ownedWrite(ctx, "Release", claim.ID, claim.Owner, now, func(b []byte) error {
		r := s.head(b)
		r.State = idem.StateRetryableFailure
		r.RawBodySHA256 = claim.RawBodySHA256
		r.LeaseExpires = time.Time{}
		r.Renewed = time.Time{}
		if err := tooLarge(&r, nil); err != nil {
			return err
		}
		s.put(&r, nil, 0)
		return nil
	})
}

// Renew implements idem.Store.
func (s *Store) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	return s.ownedWrite(ctx, "Renew", id, owner, now, func(b []byte) error {
		s.putTime(b[offLease:], msec(leaseExpires))
		s.putTime(b[offRenewed:], msec(now))
		return nil
	})
}

// Delete implements idem.Store.
func (s *Store) Delete(ctx context.Context, id, owner string, now time.Time) error {
	return s.ownedWrite(ctx, "Delete", id, owner, now, func([]byte) error {
		delete(s.recs, id)
		return nil
	})
}

// ownedWrite is a write by owner to its own record id, counted as call:
// under the lock, ErrFenced unless owner holds id at now, else apply(the
// record) does the write in place (all of it, or nothing when it fails).
func (s *Store) ownedWrite(ctx context.Context, call, id, owner string, now time.Time, apply func(b []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[call]++
	s.compactLocs()
	b, err := s.owned(id, owner, now)
	if err != nil {
		return err
	}
	return apply(b)
}

// Get implements idem.Store.
func (s *Store) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	if err := ctx.Err(); err != nil {
		return idem.Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["Get"]++
	b := s.live(id, now)
	if b == nil {
		return idem.Record{}, false, nil
	}
	return s.record(b), true, nil
}
