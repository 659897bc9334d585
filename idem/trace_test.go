package idem_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestGuardTracesClaimCompletionReplay: with a TracerProvider, a Guard
// records a span per claim, completion and replay (OpenTelemetry API, here
// a recording provider), each with the operation, the key's hash (never
// the key) and the outcome; a store that is unavailable marks the claim's
// span as an error. Without one, nothing is recorded (the other tests run
// with the no-op default).
func TestGuardTracesClaimCompletionReplay(t *testing.T) {
	spans := &testutil.Spans{}
	e := newEnv(t, func(c *idem.Config) { c.TracerProvider = spans })
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	e.call(&handler{}, ev)
	e.call(&handler{}, ev)
	want := []string{"idemkit.idempotency.claim", "idemkit.idempotency.complete", "idemkit.idempotency.claim", "idemkit.idempotency.replay"}
	if got := spans.Names(); !slices.Equal(got, want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	outcomes := []string{"claimed", "completed", "exists", "replay"}
	for i, sp := range spans.Ended() {
		if sp.Attrs["idemkit.operation"] != "POST /runs" || sp.Attrs["idemkit.key_hash"] == "" || sp.Attrs["idemkit.outcome"] != outcomes[i] || sp.Error {
			t.Errorf("span %d: %+v, want operation, key hash and outcome %q", i, sp, outcomes[i])
		}
		for k, v := range sp.Attrs {
			if strings.Contains(v, testKey) {
				t.Errorf("span %s attribute %s carries the key", sp.Name, k)
			}
		}
	}

	down := &testutil.Spans{}
	s := newStallStore("Claim")
	s.unavailable = fmt.Errorf("%w: throttled", idem.ErrStoreUnavailable)
	g := stallGuard(t, s, func(c *idem.Config) { c.TracerProvider = down })
	if _, err := g.HTTPAPI((&handler{}).v2)(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	got := down.Ended()
	if len(got) != 1 || got[0].Name != "idemkit.idempotency.claim" || !got[0].Error || got[0].Attrs["idemkit.outcome"] != "store-unavailable" {
		t.Fatalf("unavailable store: spans %+v, want one failed claim span", got)
	}
}
