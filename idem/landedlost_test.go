package idem_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// landedLostStore applies each chosen completion and then fails it as an
// outage, as DynamoDB does when it applied a write whose every answer was
// lost (the SDK's attempts reset, or the call sent as the client's
// deadline passed): the record holds the outcome, the Guard sees only
// ErrStoreUnavailable. With land unset the completion fails the same way
// without being written (throttled past the retries). failGet fails every
// Get the same way.
type landedLostStore struct {
	idem.Store
	mu      sync.Mutex
	armed   bool
	land    bool
	failGet bool
	fired   int
	gets    int
}

func (s *landedLostStore) arm(land, failGet bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.land, s.failGet = true, land, failGet
}

func (s *landedLostStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.mu.Lock()
	armed, land := s.armed, s.land
	s.armed = false
	if armed {
		s.fired++
	}
	s.mu.Unlock()
	if !armed {
		return s.Store.Complete(ctx, claim, out, now)
	}
	if land {
		if err := s.Store.Complete(context.Background(), claim, out, now); err != nil {
			return err
		}
	}
	return fmt.Errorf("PutItem: every answer lost: %w", idem.ErrStoreUnavailable)
}

func (s *landedLostStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	s.mu.Lock()
	s.gets++
	fail := s.failGet
	s.mu.Unlock()
	if fail {
		return idem.Record{}, false, fmt.Errorf("GetItem: throttled: %w", idem.ErrStoreUnavailable)
	}
	return s.Store.Get(ctx, id, now)
}

// TestCompletionLandedWithEveryAnswerLost: a completion without
// idem.Transact writes that the store applied while every answer of it
// was lost is the request's outcome: the first caller gets the handler's
// own answer (not a 503 whose retry could only be the replay, or for a
// response not kept 410, so that no caller ever saw the true response),
// Guard.Once the value without error, and every retry the replay; the
// handler runs once. A completion that did not land, or whose record
// cannot be read back, is still 503 with the record left claimed. No read
// is made on a completion that succeeds.
func TestCompletionLandedWithEveryAnswerLost(t *testing.T) {
	big := bytes.Repeat([]byte("x"), idem.MaxResponseBytes+1)
	big[0], big[len(big)-1] = '"', '"'
	for _, c := range []struct {
		name string
		body string
	}{
		{"kept", `{"id":"r-1"}`},
		{"not kept", string(big)},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &landedLostStore{}
			e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
			h := &handler{status: 201, body: c.body}
			ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
			s.arm(true, false)
			first := e.call(h, ev)
			if s.fired != 1 {
				t.Fatal("the fault was not injected")
			}
			if first.StatusCode != 201 || first.Body != c.body || headerOf(first.Headers).Get("OpenWOP-Idempotent-Replay") != "" {
				t.Fatalf("first: %d %.200s; want the handler's own 201 (its completion landed)", first.StatusCode, first.Body)
			}
			for range 2 {
				r := e.call(h, ev)
				if c.body == string(big) {
					wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 201, len(big))
				} else if r.StatusCode != 201 || r.Body != c.body || headerOf(r.Headers).Get("OpenWOP-Idempotent-Replay") != "true" {
					t.Fatalf("retry: %d %s; want the replay", r.StatusCode, r.Body)
				}
			}
			if h.Calls() != 1 {
				t.Fatalf("handler ran %d times, want once", h.Calls())
			}
			if !strings.Contains(e.logs.String(), "completion whose answer was lost found written") {
				t.Fatalf("the landed completion is not logged:\n%s", e.logs.String())
			}
		})
	}

	t.Run("Once", func(t *testing.T) {
		s := &landedLostStore{}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
		runs := 0
		w := idem.Work{Key: testKey, Operation: "charge", Payload: []byte(`{"a":1}`),
			Run: func(context.Context) ([]byte, error) { runs++; return []byte(`{"charged":true}`), nil }}
		s.arm(true, false)
		val, ran, err := e.guard.Once(context.Background(), w)
		if err != nil || !ran || string(val) != `{"charged":true}` {
			t.Fatalf("Once = %q, ran %t, %v; want the value, ran, no error", val, ran, err)
		}
		val, ran, err = e.guard.Once(context.Background(), w)
		if err != nil || ran || string(val) != `{"charged":true}` || runs != 1 {
			t.Fatalf("Once again = %q, ran %t, %v (runs %d); want the recorded value, not run", val, ran, err, runs)
		}
	})

	// Not landed, or landed but the record cannot be read back: the
	// outcome is unknown, 503 as before; the record stays claimed (in
	// flight, or the replay once the read would have found it), and the
	// handler never runs twice.
	for _, c := range []struct {
		name          string
		land, failGet bool
	}{
		{"not landed", false, false},
		{"landed, read back failed", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &landedLostStore{}
			e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
			h := &handler{status: 201, body: `{"id":"r-1"}`}
			ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
			s.arm(c.land, c.failGet)
			first := e.call(h, ev)
			if first.StatusCode != 503 || !strings.Contains(first.Body, idem.CodeStoreUnavailable) {
				t.Fatalf("first: %d %s; want 503", first.StatusCode, first.Body)
			}
			s.mu.Lock()
			s.failGet = false
			s.mu.Unlock()
			r := e.call(h, ev)
			switch {
			case !c.land && r.StatusCode == 409 && strings.Contains(r.Body, "idempotency_in_flight"):
			case c.land && r.StatusCode == 201 && headerOf(r.Headers).Get("OpenWOP-Idempotent-Replay") == "true":
			default:
				t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
			}
			if h.Calls() != 1 {
				t.Fatalf("handler ran %d times", h.Calls())
			}
		})
	}

	t.Run("no read on success", func(t *testing.T) {
		s := &landedLostStore{}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
		h := &handler{status: 201, body: `{"id":"r-1"}`}
		if r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`)); r.StatusCode != 201 || s.gets != 0 {
			t.Fatalf("%d with %d reads; want 201 with none", r.StatusCode, s.gets)
		}
	})
}
