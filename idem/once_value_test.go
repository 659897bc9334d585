package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// Guard.Once replays the value Run returned, byte for byte, under every
// policy: the ERP policy's request_id stamp is for HTTP answers, so a
// value with a top-level "request_id" member keeps its own.
func TestOnceReplaysTheValueUnchanged(t *testing.T) {
	g, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Policy: erp.Policy, Tenant: idem.SingleTenant("erp")})
	if err != nil {
		t.Fatal(err)
	}
	invocation := func(id string) context.Context {
		ctx, cancel := context.WithTimeout(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id}), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	const value = `{"request_id":"upstream-123","charged":5}`
	w := idem.Work{Operation: "charge", Key: "k-1", Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
		return []byte(value), nil
	}}
	first, ran, err := g.Once(invocation("inv-1"), w)
	if err != nil || !ran || string(first) != value {
		t.Fatalf("first: %s %v %v", first, ran, err)
	}
	again, ran, err := g.Once(invocation("inv-2"), w)
	if err != nil || ran || string(again) != value {
		t.Fatalf("replay: %s (ran %v, %v); want %s", again, ran, err, value)
	}
}

// Work.Operation is required, as Work.Run is: without it two kinds of work
// keyed by one business id (an order's charge and its shipment) would
// share a record, and the second would be answered the first's value
// without running. Once refuses it as a *ConfigError (ErrConfig), Run does
// not run and nothing is written, whatever the key.
func TestOnceRequiresOperation(t *testing.T) {
	e := newEnv(t, nil)
	for _, op := range []string{"", " ", "\t\n"} {
		ran := false
		w := idem.Work{Operation: op, Key: "order-42", Payload: []byte(`{}`), Run: func(context.Context) ([]byte, error) {
			ran = true
			return []byte(`"charged"`), nil
		}}
		v, didRun, err := e.guard.Once(context.Background(), w)
		if !errors.Is(err, idem.ErrConfig) || didRun || ran || v != nil {
			t.Errorf("Operation %q: value %q, ran %v/%v, err %v; want ErrConfig, nothing run", op, v, didRun, ran, err)
		}
	}
	if n := e.store.Len(); n != 0 {
		t.Errorf("%d records written, want none", n)
	}
	// So does a Guard with idempotency disabled, as for a nil Run: the
	// wiring mistake shows wherever the code runs.
	d := newEnv(t, func(c *idem.Config) { c.Disabled = true })
	if v, ran, err := d.guard.Once(context.Background(), idem.Work{Key: "k", Run: func(context.Context) ([]byte, error) { return []byte(`1`), nil }}); !errors.Is(err, idem.ErrConfig) || ran || v != nil {
		t.Errorf("disabled: %q %v %v; want ErrConfig, nothing run", v, ran, err)
	}
}

// An empty value is nil on every call (RED_TEAM 551): the call that ran
// Run and every replay agree on it, whether Run returned nil or an empty
// non-nil slice, where the call that ran Run used to get Run's empty
// slice and every replay nil (the store keeps no empty body apart from
// none), so a caller testing the value against nil took the replay for
// another outcome. A value with bytes is replayed as it was.
func TestOnceEmptyValueIsNilOnEveryCall(t *testing.T) {
	e := newEnv(t, nil)
	for i, v := range [][]byte{nil, {}, make([]byte, 0, 8)} {
		w := idem.Work{Operation: "op", Key: "k-" + string(rune('a'+i)), Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
			return v, nil
		}}
		first, ran, err := e.guard.Once(context.Background(), w)
		if err != nil || !ran || first != nil {
			t.Errorf("value %d (nil %v): first call %q (nil %v), ran %v, err %v; want nil, ran", i, v == nil, first, first == nil, ran, err)
		}
		again, ran, err := e.guard.Once(context.Background(), w)
		if err != nil || ran || again != nil {
			t.Errorf("value %d (nil %v): replay %q (nil %v), ran %v, err %v; want nil, replayed", i, v == nil, again, again == nil, ran, err)
		}
	}
}
