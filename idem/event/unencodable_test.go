package event_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/event"
)

type charged struct {
	OrderID string  `json:"orderId"`
	Ratio   float64 `json:"ratio"`
}

// fn succeeded (its effect happened) but its value has no JSON encoding
// (here a float at +Inf): the value cannot be kept for duplicates, so it is
// recorded as not kept, as a value over the size limit is. The delivery
// that ran fn gets the value; every redelivery gets idem.ErrNotKept, and fn
// never runs again. Before, the encoding error was fn's error, never
// recorded, so every redelivery ran fn again.
func TestUnencodableValueRunsOnce(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var charges atomic.Int32
	charge, err := event.Func(g, event.Config[order]{Operation: "charge", Key: orderKey},
		func(ctx context.Context, o order) (charged, error) {
			charges.Add(1)
			return charged{OrderID: o.ID, Ratio: math.Inf(1)}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	o := order{ID: "o-1", Total: 100}
	v, err := charge(context.Background(), o)
	if err != nil || v.OrderID != "o-1" {
		t.Fatalf("the delivery that ran fn: %+v, %v; want its value", v, err)
	}
	for i := range 2 {
		if _, err := charge(context.Background(), o); !errors.Is(err, idem.ErrNotKept) {
			t.Fatalf("redelivery %d: %v; want idem.ErrNotKept", i, err)
		}
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("fn ran %d times for one key", n)
	}
}

// A value holding a string that is not valid UTF-8 (a name read from a
// Latin-1 system) has a JSON encoding, but not a faithful one: encoding/json
// writes each invalid byte as U+FFFD. Replayed, it would be another value
// than the one the delivery that ran fn got, silently. It is recorded as
// not kept, as a value with no encoding is: the delivery that ran fn gets
// its value, every redelivery idem.ErrNotKept, and fn never runs again. A
// string holding U+FFFD itself is valid and replays as it is. Before, the
// redelivery got "Jos\uFFFD" for "Jos\xe9" with no error.
func TestInvalidUTF8ValueIsNotKept(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var charges atomic.Int32
	charge, err := event.Func(g, event.Config[order]{Operation: "charge", Key: orderKey},
		func(ctx context.Context, o order) (charged, error) {
			charges.Add(1)
			if o.ID == "valid" {
				return charged{OrderID: "Jos\uFFFD \\ufffd"}, nil
			}
			return charged{OrderID: "Jos\xe9"}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	o := order{ID: "o-1", Total: 100}
	v, err := charge(context.Background(), o)
	if err != nil || v.OrderID != "Jos\xe9" {
		t.Fatalf("the delivery that ran fn: %q, %v; want its value", v.OrderID, err)
	}
	for i := range 2 {
		if v, err := charge(context.Background(), o); !errors.Is(err, idem.ErrNotKept) {
			t.Fatalf("redelivery %d: %q, %v; want idem.ErrNotKept", i, v.OrderID, err)
		}
	}
	if n := charges.Load(); n != 1 {
		t.Fatalf("fn ran %d times for one key", n)
	}
	valid := order{ID: "valid"}
	first, err := charge(context.Background(), valid)
	if err != nil {
		t.Fatal(err)
	}
	again, err := charge(context.Background(), valid)
	if err != nil || again != first || charges.Load() != 2 {
		t.Fatalf("valid U+FFFD replayed as %q, %v (runs %d); want %q", again.OrderID, err, charges.Load(), first.OrderID)
	}
}
