package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepReturnsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context: %v, want context.Canceled", err)
	}
	if err := Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) on a cancelled context: %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0): %v, want nil", err)
	}
	if err := Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Fatalf("Sleep(1ns): %v, want nil", err)
	}
}

func TestSystemTicks(t *testing.T) {
	ticks, stop := System{}.NewTicker(time.Millisecond)
	defer stop()
	<-ticks
}

func TestRemaining(t *testing.T) {
	if _, ok := Remaining(context.Background()); ok {
		t.Fatal("Remaining of a context without a deadline reports one")
	}
	ctx, cancel := context.WithDeadline(context.Background(), Wall().Add(-time.Second))
	defer cancel()
	if d, ok := Remaining(ctx); !ok || d >= 0 {
		t.Fatalf("Remaining of a passed deadline: %s %v, want a negative duration", d, ok)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if d, ok := Remaining(ctx); !ok || d <= 0 || d > time.Hour {
		t.Fatalf("Remaining of an hour's deadline: %s %v", d, ok)
	}
}
