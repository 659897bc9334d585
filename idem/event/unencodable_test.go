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
