package devstack

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakePasses is a resumer's pass function recording when it ran, answering
// what the test sets, optionally held until released.
type fakePasses struct {
	mu   sync.Mutex
	at   []time.Time
	n    int
	err  error
	hold chan struct{} // when set, a pass waits for it to close
	// returned counts the passes that have returned; lastN and lastErr
	// are what the last of them answered.
	returned int
	lastN    int
	lastErr  error
}

func (f *fakePasses) pass(ctx context.Context) (int, error) {
	f.mu.Lock()
	f.at = append(f.at, time.Now())
	n, err, hold := f.n, f.err, f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	f.returned++
	f.lastN, f.lastErr = n, err
	f.mu.Unlock()
	return n, err
}

// idle reports whether no pass is under way and the last one found
// nothing and did not fail (so the resumer's next pass is its idle
// interval away, unless a wake time is pending).
func (f *fakePasses) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.returned == len(f.at) && f.lastN == 0 && f.lastErr == nil
}

func (f *fakePasses) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.at)
}

func (f *fakePasses) passAt(i int) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.at[i]
}

func (f *fakePasses) set(n int, err error, hold chan struct{}) {
	f.mu.Lock()
	f.n, f.err, f.hold = n, err, hold
	f.mu.Unlock()
}

// waitPasses waits until f has made want passes. d is the pass's expected
// time; the bound is a minute at least, since a pass that must come may
// come late on a loaded machine and must not fail the test for it.
func (f *fakePasses) waitPasses(t *testing.T, want int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(max(d, time.Minute))
	for f.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d passes after %s, want %d", f.count(), d, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestResumerPassesAtWakeTimes: `idemkit dev` runs ResumeDue at start-up,
// at the wake time of each run its executor parks (each of several, none
// forgotten, also one noted while a pass is under way), a retry interval
// after a pass that failed or found a full batch, and otherwise only every
// idle interval: an idle stack no longer queries the runs table every
// second, and a parked run is resumed at its wake time.
func TestResumerPassesAtWakeTimes(t *testing.T) {
	f := &fakePasses{}
	r := newResumer(f.pass, 10)
	r.idle, r.retry = time.Hour, 150*time.Millisecond
	var resumed atomic.Int32
	r.resumed = func() { resumed.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.run(ctx); close(done) }()
	defer func() {
		cancel()
		<-done
	}()
	// quiet first waits, by state, until the resumer has nothing left to
	// do (no pass under way, the last found nothing, every wake time
	// served: a pass that began before a wake time leaves it pending even
	// when its recorded start is after it); then no pass may follow.
	quiet := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
			r.mu.Lock()
			pending := len(r.wakes)
			r.mu.Unlock()
			if pending == 0 && f.idle() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the resumer never went idle (%d wake times pending)", what, pending)
			}
		}
		n := f.count()
		time.Sleep(300 * time.Millisecond)
		if f.count() != n {
			t.Fatalf("%s: %d passes without a wake time", what, f.count()-n)
		}
	}

	f.waitPasses(t, 1, 2*time.Second) // start-up
	quiet("idle after start-up")

	// Two parked runs: a pass at each wake time, never before it, none
	// forgotten. On a loaded machine one late pass may come after both
	// wake times and serve both runs; so the check is that some pass comes
	// at or after the later one, and that none came before the earlier.
	t0 := time.Now()
	w1, w2 := t0.Add(200*time.Millisecond), t0.Add(400*time.Millisecond)
	before := f.count()
	r.parked(w2)
	r.parked(w1)
	for deadline := time.Now().Add(time.Minute); f.count() == before || f.passAt(f.count()-1).Before(w2); {
		if time.Now().After(deadline) {
			t.Fatalf("no pass at or after the later wake time (+400ms) in a minute: %d passes", f.count()-before)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := before; i < f.count(); i++ {
		if f.passAt(i).Before(w1) {
			t.Fatalf("a pass at +%s, before the first wake time (+200ms)", f.passAt(i).Sub(t0))
		}
	}
	quiet("after the wake times")

	// A wake time already past, noted while a pass is under way (that
	// pass's query may have missed the run): another pass follows at once.
	hold := make(chan struct{})
	f.set(0, nil, hold)
	m := f.count()
	r.parked(time.Now())
	f.waitPasses(t, m+1, 2*time.Second)
	r.parked(time.Now().Add(-time.Second))
	f.set(0, nil, nil)
	close(hold)
	f.waitPasses(t, m+2, 2*time.Second)
	quiet("after the late notice")

	// A failing pass (a due run stays parked) is retried after the retry
	// interval, and so is a full batch, which also wakes the pollers.
	f.set(0, errors.New("store down"), nil)
	n := f.count()
	r.parked(time.Now())
	f.waitPasses(t, n+3, 2*time.Second)
	if gap := f.passAt(n + 2).Sub(f.passAt(n + 1)); gap < r.retry {
		t.Fatalf("a failed pass was retried after %s, want %s", gap, r.retry)
	}
	if resumed.Load() != 0 {
		t.Fatal("a pass that executed nothing woke the pollers")
	}
	f.set(10, nil, nil)
	f.waitPasses(t, f.count()+2, 2*time.Second)
	if resumed.Load() == 0 {
		t.Fatal("a pass that executed runs did not wake the pollers")
	}
	f.set(0, nil, nil)
	quiet("after a pass that found nothing")
}
