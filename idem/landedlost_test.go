package idem_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
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
	// releaseLost fails every Release as an outage, applied first when
	// the store accepts it (its every answer lost).
	releaseLost bool
}

func (s *landedLostStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	s.mu.Lock()
	lost := s.releaseLost
	s.mu.Unlock()
	if !lost {
		return s.Store.Release(ctx, claim, now)
	}
	_ = s.Store.Release(context.Background(), claim, now) // refused (fenced) when the record is final
	return fmt.Errorf("UpdateItem: every answer lost: %w", idem.ErrStoreUnavailable)
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
			if s.gets != 1 {
				t.Fatalf("%d reads after the lost completion, want one", s.gets)
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

// TestTransactionalCompletionLandedReleaseLost: a completion with
// idem.Transact writes that failed as an outage is followed by its
// release, fenced by the claim's owner token; when that release fails as
// an outage too (its every answer lost, as in a partition that cut both),
// one read of the record, bounded to a second, still tells the claim's
// own completion: landed, the first caller gets the handler's own answer
// and Guard.Once its value, never 503 or idem.ErrNotCommitted about
// writes that committed. Not landed (the release applied, the record
// retryable), it is 503 and ErrNotCommitted as before, and the retry
// commits the writes once.
func TestTransactionalCompletionLandedReleaseLost(t *testing.T) {
	for _, land := range []bool{true, false} {
		name := map[bool]string{true: "landed", false: "not landed"}[land]
		t.Run(name+"/HTTPAPI", func(t *testing.T) {
			s := &landedLostStore{releaseLost: true}
			e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
			ms := s.Store.(*memstore.Store)
			h := &handler{status: 201, body: `{"id":"r-1"}`, before: func(ctx context.Context) {
				_ = idem.Transact(ctx, memstore.Write{Key: "order-1", Value: []byte("o")})
			}}
			ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
			s.arm(land, false)
			first := e.call(h, ev)
			if _, committed := ms.Item("order-1"); committed != land {
				t.Fatalf("write committed %t, want %t", committed, land)
			}
			if s.gets != 1 {
				t.Fatalf("%d reads after the lost completion and release, want one", s.gets)
			}
			if land {
				if first.StatusCode != 201 || first.Body != `{"id":"r-1"}` || headerOf(first.Headers).Get("OpenWOP-Idempotent-Replay") != "" {
					t.Fatalf("first: %d %s; want the handler's own 201 (its writes committed)", first.StatusCode, first.Body)
				}
			} else if first.StatusCode != 503 {
				t.Fatalf("first: %d %s; want 503", first.StatusCode, first.Body)
			}
			s.mu.Lock()
			s.releaseLost = false
			s.mu.Unlock()
			r := e.call(h, ev)
			if r.StatusCode != 201 || r.Body != `{"id":"r-1"}` {
				t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
			}
			if want := map[bool]int{true: 1, false: 2}[land]; h.Calls() != want {
				t.Fatalf("handler ran %d times, want %d", h.Calls(), want)
			}
		})
		t.Run(name+"/Once", func(t *testing.T) {
			s := &landedLostStore{releaseLost: true}
			e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
			w := idem.Work{Key: testKey, Operation: "charge", Payload: []byte(`{"a":1}`),
				Run: func(ctx context.Context) ([]byte, error) {
					if err := idem.Transact(ctx, memstore.Write{Key: "charge-1", Value: []byte("c")}); err != nil {
						return nil, err
					}
					return []byte(`{"charged":true}`), nil
				}}
			s.arm(land, false)
			val, ran, err := e.guard.Once(context.Background(), w)
			switch {
			case land && (err != nil || !ran || string(val) != `{"charged":true}`):
				t.Fatalf("Once whose writes committed = %q, ran %t, %v; want the value, ran, no error", val, ran, err)
			case !land && (!errors.Is(err, idem.ErrNotCommitted) || !errors.Is(err, idem.ErrStoreUnavailable)):
				t.Fatalf("Once whose writes did not commit = %q, ran %t, %v; want ErrNotCommitted wrapping ErrStoreUnavailable", val, ran, err)
			}
		})
	}
}
