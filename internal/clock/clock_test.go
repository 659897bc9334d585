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

func TestEachTickCallsFnPerTickUntilDone(t *testing.T) {
	ticks := make(chan time.Time)
	done := make(chan struct{})
	calls := make(chan int)
	exited := make(chan struct{})
	n := 0
	go func() {
		defer close(exited)
		EachTick(done, ticks, func() bool {
			n++
			calls <- n
			return true
		})
	}()
	for want := 1; want <= 3; want++ {
		ticks <- time.Time{}
		if got := <-calls; got != want {
			t.Fatalf("call %d, want %d", got, want)
		}
	}
	close(done)
	<-exited
	if n != 3 {
		t.Fatalf("fn ran %d times after done, want 3", n)
	}
}

func TestEachTickStopsWhenFnSaysSo(t *testing.T) {
	ticks := make(chan time.Time, 1)
	n := 0
	ticks <- time.Time{}
	EachTick(make(chan struct{}), ticks, func() bool { n++; return false })
	if n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
}

func TestEachTickDoneWinsOverAPendingTick(t *testing.T) {
	ticks := make(chan time.Time, 1)
	done := make(chan struct{})
	ticks <- time.Time{}
	close(done)
	for i := 0; i < 100; i++ { // the first select may pick the tick: done still wins
		EachTick(done, ticks, func() bool { t.Fatal("fn ran after done was closed"); return false })
		select {
		case ticks <- time.Time{}:
		default:
		}
	}
}

func TestManualMovesOnlyWhenTold(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := NewManual(t0)
	if !m.Now().Equal(t0) {
		t.Fatalf("Now %v, want %v", m.Now(), t0)
	}
	m.Advance(time.Minute)
	m.Set(t0) // never backwards
	if want := t0.Add(time.Minute); !m.Now().Equal(want) {
		t.Fatalf("after Advance and a Set backwards: %v, want %v", m.Now(), want)
	}
	m.Set(t0.Add(time.Hour))
	f := m.SleepAdvances()
	if err := f.Sleep(context.Background(), 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(3 * time.Hour); !f.Now().Equal(want) || !m.Now().Equal(want) {
		t.Fatalf("after Set and an advancing Sleep: %v, want %v", m.Now(), want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("an advancing Sleep on a cancelled context: %v", err)
	}
	if want := t0.Add(3 * time.Hour); !m.Now().Equal(want) {
		t.Fatalf("a cancelled Sleep moved the clock to %v", m.Now())
	}
}

// TestBefore: Before is Wall().Before(deadline), for a deadline with a
// monotonic reading and for one without (Round(0) strips it, as a deadline
// read from a wall-clock epoch has none).
func TestBefore(t *testing.T) {
	now := Wall()
	for _, c := range []struct {
		deadline time.Time
		want     bool
	}{
		{now.Add(time.Hour), true},
		{now.Add(time.Hour).Round(0), true},
		{now.Add(-time.Hour), false},
		{now.Add(-time.Hour).Round(0), false},
		{now, false},
	} {
		if got := Before(c.deadline); got != c.want {
			t.Errorf("Before(%v) = %v, want %v", c.deadline, got, c.want)
		}
	}
}
