package idem_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// lateClaimStore stands for a network between the Guard and its store: the
// caller's context is cancelled while its claim is on the way, and a call
// whose context ends then is answered with the context's error at once,
// while the write it sent is applied by the store later, after the next
// call the Guard makes (its give-back). A call whose context the
// cancellation does not end waits for its answer, as the store applies the
// write in order.
type lateClaimStore struct {
	idem.Store
	cancel context.CancelFunc
	mu     sync.Mutex
	armed  bool
	late   func()
}

func (s *lateClaimStore) Claim(ctx context.Context, r idem.Record, now time.Time) (idem.ClaimResult, error) {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if armed {
		s.cancel() // the caller goes away while the claim is on the way
		if err := ctx.Err(); err != nil {
			s.mu.Lock()
			s.late = func() { _, _ = s.Store.Claim(context.Background(), r, now) }
			s.mu.Unlock()
			return idem.ClaimResult{}, err
		}
	}
	return s.Store.Claim(ctx, r, now)
}

func (s *lateClaimStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	err := s.Store.Release(ctx, claim, now)
	s.land()
	return err
}

// land applies a claim still on the way.
func (s *lateClaimStore) land() {
	s.mu.Lock()
	late := s.late
	s.late = nil
	s.mu.Unlock()
	if late != nil {
		late()
	}
}

// A caller cancelled while its claim is on the way to the store (an SQS
// consumer's invocation ending, an HTTP client hanging up) gets
// context.Canceled, and the key is not left claimed by a write that lands
// after the give-back: the next call with the key runs the work at once,
// never ErrInFlight until the lease ends. The claim's call waits for its
// own answer (its cancellation detached; its deadline kept), so the
// give-back follows the claim it gives back. Before (RED_TEAM 451), the
// claim's call ended with the caller's context, the give-back was sent
// before the claim landed and wrote nothing, and the key was in flight
// for the whole lease (found on DynamoDB Local, whose first claim is
// slow).
func TestCancelledClaimLandingLateIsGivenBack(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &lateClaimStore{Store: e.store, cancel: cancel, armed: true}
	g, err := idem.New(idem.Config{Store: st, Tenant: idem.SingleTenant("shop"), Wait: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	w := idem.Work{Operation: "ship", Key: "order-42", Payload: []byte(`{}`), Run: func(context.Context) ([]byte, error) {
		runs++
		return []byte(`"shipped"`), nil
	}}
	if _, ran, err := g.Once(ctx, w); !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("the cancelled call: ran %v, %v; want context.Canceled, not run", ran, err)
	}
	st.land() // whatever is still on the way lands now
	v, ran, err := g.Once(context.Background(), w)
	if err != nil || !ran || string(v) != `"shipped"` || runs != 1 {
		t.Fatalf("the next call: %s ran %v, %v (work ran %d times); want the work run at once", v, ran, err, runs)
	}
	// A caller gone before its claim is sent makes no store call at all.
	calls := 0
	counted := &claimCallCounter{Store: e.store, calls: &calls}
	g2, err := idem.New(idem.Config{Store: counted, Tenant: idem.SingleTenant("shop"), Wait: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gone, stop := context.WithCancel(context.Background())
	stop()
	w.Key = "order-43"
	if _, ran, err := g2.Once(gone, w); !errors.Is(err, context.Canceled) || ran || calls != 0 {
		t.Fatalf("a caller gone before the claim: ran %v, %v, %d store calls; want context.Canceled and none", ran, err, calls)
	}
}

// claimCallCounter counts the claims and releases sent to its store.
type claimCallCounter struct {
	idem.Store
	calls *int
}

func (s *claimCallCounter) Claim(ctx context.Context, r idem.Record, now time.Time) (idem.ClaimResult, error) {
	*s.calls++
	return s.Store.Claim(ctx, r, now)
}

func (s *claimCallCounter) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	*s.calls++
	return s.Store.Release(ctx, claim, now)
}
