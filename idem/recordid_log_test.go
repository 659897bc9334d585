package idem_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// idQuotingStore is a store whose errors quote the record ID, as a store's
// errors may (dynamostore names the record whose chunks it could not
// read): each call fails once, and the IDs it saw are kept.
type idQuotingStore struct {
	idem.Store
	mu     sync.Mutex
	failed map[string]bool
	ids    map[string]bool
}

func (s *idQuotingStore) fail(op, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[id] = true
	if s.failed[op] {
		return nil
	}
	s.failed[op] = true
	return fmt.Errorf("store: record %s: %s failed", id, op)
}

func (s *idQuotingStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	if err := s.fail("claim", rec.ID); err != nil {
		return idem.ClaimResult{}, err
	}
	return s.Store.Claim(ctx, rec, now)
}

func (s *idQuotingStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if err := s.fail("complete", claim.ID); err != nil {
		return err
	}
	return s.Store.Complete(ctx, claim, out, now)
}

func (s *idQuotingStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	if err := s.fail("get", id); err != nil {
		return idem.Record{}, false, err
	}
	return s.Store.Get(ctx, id, now)
}

// TestRecordIDNeverLogged: the record ID is an unkeyed hash of the tenant,
// the operation and the key, so anyone who reads it can test a guessed key
// against it; like the key, it never reaches the logs, even quoted in a
// store's error.
func TestRecordIDNeverLogged(t *testing.T) {
	st := &idQuotingStore{failed: map[string]bool{}, ids: map[string]bool{}}
	e := newEnv(t, func(c *idem.Config) {
		st.Store = c.Store
		c.Store = st
		c.Wait = 30 * time.Millisecond
	})
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	for range 4 { // the claim fails, the completion fails, then a replay
		e.call(&handler{}, ev)
	}
	logs := e.logs.String()
	if len(st.ids) == 0 || !strings.Contains(logs, "store: record ") {
		t.Fatalf("the store's errors were not logged (ids %v):\n%s", st.ids, logs)
	}
	for id := range st.ids {
		if strings.Contains(logs, id) {
			t.Fatalf("record ID %s logged:\n%s", id, logs)
		}
	}
}

// TestPanicLoggedWithItsStack: a recovered handler panic is answered 500
// (retryable) and logged with the panicking goroutine's stack, so a
// nil-pointer panic in production can be found; keyed or not.
func TestPanicLoggedWithItsStack(t *testing.T) {
	var nilRecord *idem.Record
	boom := func(context.Context) { _ = nilRecord.ID } // a nil-pointer panic
	for _, key := range []string{testKey, ""} {
		e := newEnv(t, nil)
		if r := e.call(&handler{before: boom}, v2event("POST", "POST /runs", key, `{}`)); r.StatusCode != 500 {
			t.Fatalf("key %q: %d, want 500", key, r.StatusCode)
		}
		logs := e.logs.String()
		if !strings.Contains(logs, `"stack":"goroutine `) || !strings.Contains(logs, "TestPanicLoggedWithItsStack") {
			t.Fatalf("key %q: the panic's log line has no stack:\n%s", key, logs)
		}
	}
}
