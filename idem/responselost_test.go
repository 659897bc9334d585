package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// losingStore is a store that, once gone is set, lost part of the
// response of every final record (as a DynamoDB chunk item gone): a
// replay's Claim and a Get of such a record fail with
// idem.ErrNotKept, as Store documents.
type losingStore struct {
	idem.Store
	gone    atomic.Bool
	waiting chan struct{} // if set, closed when a claim first finds the record pending
	once    sync.Once
}

func (s *losingStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, rec, now)
	if err == nil && res.Decision == idem.Exists && res.Record.State.Final() && s.gone.Load() {
		kept := res.Record
		kept.Response = nil
		return idem.ClaimResult{Decision: idem.Exists, Record: kept}, fmt.Errorf("%w: record %s: chunk 2 missing", idem.ErrNotKept, rec.ID)
	}
	if err == nil && res.Decision == idem.Exists && res.Record.State == idem.StatePending && s.waiting != nil {
		s.once.Do(func() { close(s.waiting) })
	}
	return res, err
}

func (s *losingStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	rec, found, err := s.Store.Get(ctx, id, now)
	if err == nil && found && rec.State.Final() && s.gone.Load() {
		return idem.Record{}, false, fmt.Errorf("%w: record %s: chunk 2 missing", idem.ErrNotKept, id)
	}
	return rec, found, err
}

// wantLost checks an answer to a duplicate whose stored response is
// gone: 410 idemkit.response_not_kept in the policy's envelope, final (no
// Retry-After), never the handler's body.
func wantLost(t *testing.T, status int, h map[string]string, body string) {
	t.Helper()
	if status != http.StatusGone {
		t.Fatalf("duplicate: status %d, want 410; body %.200s", status, body)
	}
	if h[idem.HeaderRetryAfter] != "" {
		t.Fatalf("duplicate: Retry-After %q on a final answer", h[idem.HeaderRetryAfter])
	}
	var env struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || env.Error != idem.CodeResponseNotKept || env.Message == "" {
		t.Fatalf("duplicate: body %.300s (%v), want the envelope with code %s", body, err, idem.CodeResponseNotKept)
	}
}

// TestResponseLostIsGoneNotRerun: a duplicate of a request whose stored
// response the store no longer holds whole (idem.ErrNotKept) is
// answered 410 idemkit.response_not_kept, final, and the handler never
// runs again: not 500 (a retry would never help), not 503 (not an
// outage), never a re-run (the request was processed). So too for a
// duplicate that waited while the first request ran and then read the
// record, and for Guard.Once (the store's ErrNotKept, naming what is gone).
func TestResponseLostIsGoneNotRerun(t *testing.T) {
	ls := &losingStore{}
	e := newEnv(t, func(c *idem.Config) { ls.Store = c.Store; c.Store = ls })
	h := &handler{status: 201, body: `{"id":"run_1"}`}
	ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
	if r := e.call(h, ev); r.StatusCode != 201 {
		t.Fatalf("first: %d %s", r.StatusCode, r.Body)
	}
	ls.gone.Store(true)
	for range 2 {
		r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
		wantLost(t, r.StatusCode, r.Headers, r.Body)
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.Calls())
	}

	t.Run("a duplicate that waited", func(t *testing.T) {
		ls := &losingStore{waiting: make(chan struct{})}
		e := newEnv(t, func(c *idem.Config) { ls.Store = c.Store; c.Store = ls; c.Wait = 2 * time.Minute })
		block := make(chan struct{})
		running := make(chan struct{})
		h := &handler{status: 201, body: `{"id":"run_2"}`, block: block, before: func(context.Context) { close(running) }}
		ev := v2event("POST", "POST /runs", testKey, `{"a":2}`)
		first := make(chan int, 1)
		go func() { first <- e.call(h, ev).StatusCode }()
		<-running // the first request holds the key
		dup := make(chan struct {
			status int
			hdrs   map[string]string
			body   string
		}, 1)
		go func() {
			r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":2}`))
			dup <- struct {
				status int
				hdrs   map[string]string
				body   string
			}{r.StatusCode, r.Headers, r.Body}
		}()
		<-ls.waiting // the duplicate found the first request running
		ls.gone.Store(true)
		close(block)
		if s := <-first; s != 201 {
			t.Fatalf("first: %d", s)
		}
		r := <-dup
		wantLost(t, r.status, r.hdrs, r.body)
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want 1", h.Calls())
		}
	})

	t.Run("Guard.Once", func(t *testing.T) {
		ls := &losingStore{}
		e := newEnv(t, func(c *idem.Config) { ls.Store = c.Store; c.Store = ls })
		runs := 0
		work := idem.Work{Operation: "export", Key: "once-key", Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
			runs++
			return []byte(`"v"`), nil
		}}
		if _, ran, err := e.guard.Once(context.Background(), work); err != nil || !ran {
			t.Fatalf("first: ran %t, %v", ran, err)
		}
		ls.gone.Store(true)
		v, ran, err := e.guard.Once(context.Background(), work)
		if ran || v != nil || !errors.Is(err, idem.ErrNotKept) || !strings.Contains(err.Error(), "chunk 2 missing") {
			t.Fatalf("duplicate: %q, ran %t, %v; want the store's ErrNotKept", v, ran, err)
		}
		if runs != 1 {
			t.Fatalf("work ran %d times, want 1", runs)
		}
	})
}

// TestResponseLostNamesTheFirstRequest: under the ERP policy, the 410 for
// a response the store no longer holds whole names the first processed
// request (Idempotency-Original-Request-Id) from the record the store
// returns beside the error, not the current request.
func TestResponseLostNamesTheFirstRequest(t *testing.T) {
	ls := &losingStore{}
	e := newEnv(t, func(c *idem.Config) { ls.Store = c.Store; c.Store = ls; c.Policy = erp.Policy })
	h := &handler{status: 201, body: `{"id":"wo_1"}`}
	first := v2event("POST", "POST /api/v1/inbound/work-orders", "ERP-WO-lost-1", `{}`)
	if r := e.call(h, first); r.StatusCode != 201 {
		t.Fatalf("first: %d %s", r.StatusCode, r.Body)
	}
	ls.gone.Store(true)
	dup := v2event("POST", "POST /api/v1/inbound/work-orders", "ERP-WO-lost-1", `{}`)
	r := e.call(h, dup)
	if r.StatusCode != http.StatusGone {
		t.Fatalf("duplicate: %d %s, want 410", r.StatusCode, r.Body)
	}
	if got, want := r.Headers[erp.HeaderOriginalRequestID], first.RequestContext.RequestID; got != want || got == dup.RequestContext.RequestID {
		t.Fatalf("duplicate: %s %q, want the first request's %q (this one is %q)", erp.HeaderOriginalRequestID, got, want, dup.RequestContext.RequestID)
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.Calls())
	}
}
