package idem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// TestCommerceOnceDuplicatePastItsWaitIsErrInFlight: under the commerce
// policy a sync HTTP duplicate whose wait ends gets the pending action, but
// Guard.Once has no response to give: a duplicate unit of work while the
// first still runs (no wait budget) fails with ErrInFlight, as under every
// policy, and runs nothing.
func TestCommerceOnceDuplicatePastItsWaitIsErrInFlight(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Policy, c.Wait = commerce.Policy, -1 })
	entered, release := make(chan struct{}), make(chan struct{})
	w := idem.Work{Tenant: "acme", Operation: "charge", Key: "order 7", Payload: []byte(`{"n":7}`)}
	first := make(chan error, 1)
	go func() {
		w := w
		w.Run = func(context.Context) ([]byte, error) { close(entered); <-release; return []byte(`{"ok":true}`), nil }
		_, _, err := e.guard.Once(context.Background(), w)
		first <- err
	}()
	<-entered
	ran := false
	w.Run = func(context.Context) ([]byte, error) { ran = true; return nil, nil }
	_, gotRan, err := e.guard.Once(context.Background(), w)
	close(release)
	if !errors.Is(err, idem.ErrInFlight) || gotRan || ran {
		t.Fatalf("a duplicate while the first runs: ran %v/%v, %v; want ErrInFlight and nothing run", gotRan, ran, err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first: %v", err)
	}
}
