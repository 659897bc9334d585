package idem_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// refusingStore refuses a completion whose response is kept with a
// permanent error (not an outage, not a fence, not "too large": a
// validation or permission error of the backend, say), and every
// completion when all is set; it counts the refusals.
type refusingStore struct {
	idem.Store
	err     error
	all     bool
	refused atomic.Int32
}

func (s *refusingStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if r := out.Response; s.all || r != nil && r.NotKept == 0 {
		s.refused.Add(1)
		return s.err
	}
	return s.Store.Complete(ctx, claim, out, now)
}

// TestCompletionRefusedRecordsItNotKept: a store that refuses a
// completion with a permanent error other than ErrTooLarge (nothing
// written, no outage to wait out) gets the not-kept outcome written
// instead, as for a response too large to keep: the handler runs once,
// its caller gets the true response, and its duplicates 410
// idemkit.response_not_kept, never 409 in flight for the whole lease and
// then a re-run. The refusal is logged with the store's error.
func TestCompletionRefusedRecordsItNotKept(t *testing.T) {
	rs := &refusingStore{err: errors.New("ValidationException: the item could not be written")}
	e := newEnv(t, func(c *idem.Config) { rs.Store = c.Store; c.Store = rs })
	h := &handler{status: 201, body: `{"id":"r-1"}`}
	if first := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`)); first.StatusCode != 201 || first.Body != `{"id":"r-1"}` {
		t.Fatalf("first: %d %s, want the true 201", first.StatusCode, first.Body)
	}
	if n := rs.refused.Load(); n != 1 {
		t.Fatalf("%d completions refused, want 1", n)
	}
	for i := range 2 {
		r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
		wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 201, len(`{"id":"r-1"}`))
		if i == 0 && h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want once", h.Calls())
		}
	}
	// Past the lease too: the record is final, nothing reclaims it.
	e.clock.Advance(2 * e.guard.Config().Lease)
	r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 201, len(`{"id":"r-1"}`))
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want once", h.Calls())
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "ValidationException") || !strings.Contains(logs, "recorded as not kept") {
		t.Fatalf("the refusal and the not-kept outcome are not logged:\n%s", logs)
	}
}

// TestCompletionRefusedAltogether: a store that refuses every completion
// of the record, the not-kept one included, with a permanent error
// leaves what it refused to write: nothing. The caller still gets the
// true response; the record stays claimed (the Guard does not release a
// record whose handler ran, which would run it again at once), so a
// duplicate is 409 idempotency_in_flight until the lease ends.
func TestCompletionRefusedAltogether(t *testing.T) {
	rs := &refusingStore{err: errors.New("AccessDeniedException: not authorized"), all: true}
	e := newEnv(t, func(c *idem.Config) { rs.Store = c.Store; c.Store = rs })
	h := &handler{status: 201, body: `{"id":"r-1"}`}
	if first := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`)); first.StatusCode != 201 {
		t.Fatalf("first: %d %s, want the true 201", first.StatusCode, first.Body)
	}
	if n := rs.refused.Load(); n != 2 {
		t.Fatalf("%d completions refused, want 2 (the response, then the not-kept outcome)", n)
	}
	r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	if r.StatusCode != http.StatusConflict || !strings.Contains(r.Body, "idempotency_in_flight") {
		t.Fatalf("duplicate: %d %s, want 409 idempotency_in_flight", r.StatusCode, r.Body)
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want once", h.Calls())
	}
}
