package ledger

import (
	"math"
	"testing"
	"time"
)

// TestBackoffSaturatesAtAnyMax: the doubling backoff saturates at
// Retry.Max whatever its size. Before, a Max above half the largest
// time.Duration (about 146 years) let Base * 2^k pass it by overflowing:
// the delay turned negative (the next attempt scheduled in the past) or
// zero, and the default jitter panicked on it (RED_TEAM 320).
func TestBackoffSaturatesAtAnyMax(t *testing.T) {
	const year = 365 * 24 * time.Hour
	identity := func(d time.Duration) time.Duration { return d }
	for _, maxD := range []time.Duration{147 * year, 200 * year, 273 * year, 290 * year, math.MaxInt64} {
		for _, base := range []time.Duration{time.Nanosecond, time.Millisecond, time.Second, 3 * time.Second, 7 * time.Minute, maxD} {
			r := &Retry{Base: base, Max: maxD}
			prev := time.Duration(0)
			for n := 1; n <= 100; n++ {
				d := r.backoff(n, identity)
				if d <= 0 || d > maxD || d < prev {
					t.Fatalf("Base %v, Max %v: backoff after attempt %d = %v (after %v); want within (0, Max], never shorter than the one before", base, maxD, n, d, prev)
				}
				prev = d
				// The default jitter: half fixed, half random, in [d/2, d].
				if j := r.backoff(n, equalJitter); j < d/2 || j > d {
					t.Fatalf("Base %v, Max %v: jittered backoff after attempt %d = %v, want in [%v, %v]", base, maxD, n, j, d/2, d)
				}
			}
			if prev != maxD {
				t.Errorf("Base %v, Max %v: the backoff after 100 attempts is %v, want Max", base, maxD, prev)
			}
		}
	}
}
