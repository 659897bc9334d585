package idem

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
)

type ctxKey struct{}

// TestCallCtxIsContextWithDeadline: a store call's context behaves as
// context.WithDeadline(parent, deadline) would, whether or not the store
// reads Done before the call ends: its values and deadline, the parent's
// cancellation and cause (unless detached), its own deadline, and release
// (context.Canceled); a context derived from it ends with it.
func TestCallCtxIsContextWithDeadline(t *testing.T) {
	g := &Guard{cfg: Config{StoreTimeout: time.Hour, WaitMargin: time.Second}}
	root := context.WithValue(context.Background(), ctxKey{}, "v")
	for _, doneFirst := range []bool{false, true} {
		name := "Err only"
		if doneFirst {
			name = "Done read first"
		}
		t.Run(name, func(t *testing.T) {
			t.Run("live, then released", func(t *testing.T) {
				var slot callCtx
				c := g.storeCtx(&slot, root, false, time.Time{})
				if c != &slot {
					t.Fatal("storeCtx did not use the slot given")
				}
				var done <-chan struct{}
				if doneFirst {
					done = c.Done()
				}
				if err := c.Err(); err != nil {
					t.Fatalf("live call: Err %v", err)
				}
				if c.Value(ctxKey{}) != "v" {
					t.Fatal("the parent's value is lost")
				}
				dl, ok := c.Deadline()
				if !ok || dl.Before(clock.Wall().Add(59*time.Minute)) || dl.After(clock.Wall().Add(time.Hour)) {
					t.Fatalf("deadline %v %v, want now + StoreTimeout", dl, ok)
				}
				child, cancel := context.WithCancel(c)
				defer cancel()
				c.release()
				if !errors.Is(c.Err(), context.Canceled) {
					t.Fatalf("released: Err %v, want context.Canceled", c.Err())
				}
				<-c.Done()
				<-child.Done()
				if done != nil {
					<-done
				}
				if !errors.Is(context.Cause(c), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
					t.Fatalf("released: cause %v, child %v", context.Cause(c), child.Err())
				}
			})
			t.Run("parent cancelled", func(t *testing.T) {
				cause := errors.New("client gone")
				parent, cancel := context.WithCancelCause(root)
				c := g.storeCtx(nil, parent, false, time.Time{})
				defer c.release()
				detached := g.storeCtx(nil, parent, true, time.Time{})
				defer detached.release()
				if doneFirst {
					c.Done()
					detached.Done()
				}
				cancel(cause)
				if doneFirst {
					<-c.Done()
				}
				if !errors.Is(c.Err(), context.Canceled) || !errors.Is(context.Cause(c), cause) {
					t.Fatalf("parent cancelled: Err %v, cause %v", c.Err(), context.Cause(c))
				}
				<-c.Done()
				if err := detached.Err(); err != nil || context.Cause(detached) != nil || detached.Value(ctxKey{}) != "v" {
					t.Fatalf("detached call: Err %v after the parent's cancellation, value %v", err, detached.Value(ctxKey{}))
				}
				select {
				case <-detached.Done():
					t.Fatal("a detached call ended with its parent")
				default:
				}
			})
			t.Run("deadline passed", func(t *testing.T) {
				// A limit already past: the call gets minStoreCall.
				c := g.storeCtx(nil, root, false, clock.Wall().Add(-time.Minute))
				defer c.release()
				dl, _ := c.Deadline()
				if dl.After(clock.Wall().Add(minStoreCall)) {
					t.Fatalf("deadline %v beyond minStoreCall", dl)
				}
				if doneFirst {
					<-c.Done() // the timer ends it
				} else {
					for c.Err() == nil { // no timer: Err reads the wall clock
						time.Sleep(time.Millisecond)
					}
				}
				if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
					t.Fatalf("past deadline: Err %v, cause %v", c.Err(), context.Cause(c))
				}
				<-c.Done()
				c.release()
				if !errors.Is(c.Err(), context.DeadlineExceeded) {
					t.Fatalf("released after its deadline: Err %v, want DeadlineExceeded kept", c.Err())
				}
			})
		})
	}
}

// TestNextTick: the timer heartbeat keeps a ticker's cadence: each tick at
// the next multiple of the period after the start; a renewal that
// outlasted the period is followed by one tick at once, the ticks it
// outlasted beyond that one dropped.
func TestNextTick(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const every = 10 * time.Second
	for _, c := range []struct {
		name    string
		due     time.Duration // the last tick's
		now     time.Duration
		wantDue time.Duration
		wait    time.Duration
	}{
		{"quick renewal", 10 * time.Second, 11 * time.Second, 20 * time.Second, 9 * time.Second},
		{"renewal ends on the next tick", 10 * time.Second, 20 * time.Second, 20 * time.Second, 0},
		{"renewal outlasted one period", 10 * time.Second, 25 * time.Second, 20 * time.Second, 0},
		{"renewal outlasted three", 10 * time.Second, 47 * time.Second, 40 * time.Second, 0},
	} {
		due, wait := nextTick(start.Add(c.due), start.Add(c.now), every)
		if !due.Equal(start.Add(c.wantDue)) || wait != c.wait {
			t.Errorf("%s: next due %s, wait %s; want %s, %s", c.name, due.Sub(start), wait, c.wantDue, c.wait)
		}
		// After the tick at once, the next comes at the following multiple.
		if wait == 0 {
			if d2, w2 := nextTick(due, start.Add(c.now), every); !d2.Equal(due.Add(every)) || w2 != due.Add(every).Sub(start.Add(c.now)) {
				t.Errorf("%s: after the tick at once, next due %s in %s", c.name, d2.Sub(start), w2)
			}
		}
	}
}
