package idem_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestReplayAllocations pins the in-process cost of a replay: a 1 KB JSON
// request replayed from the in-memory store through HTTPAPI (header
// parsing, key scope hash, JCS body digest, fingerprint, claim, record
// copy, response building) makes at most 20 heap allocations, the response
// itself included. The bare adapter path without a key is pinned too.
func TestReplayAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random; allocation counts are meaningless")
	}
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := g.HTTPAPI(benchHandler)
	ctx := context.Background()
	ev := v2event("POST", "POST /runs", testKey, body1KB())
	if r, _ := h(ctx, ev); r.StatusCode != 201 {
		t.Fatalf("first execution: %d %s", r.StatusCode, r.Body)
	}
	replay := testing.AllocsPerRun(200, func() {
		if r, _ := h(ctx, ev); r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "true" {
			t.Fatalf("replay: %d %v", r.StatusCode, r.Headers)
		}
	})
	if replay > 20 {
		t.Errorf("1 KB replay: %v allocs, want <= 20", replay)
	}
	bare := v2event("POST", "POST /runs", "", body1KB())
	plain := testing.AllocsPerRun(200, func() { h(ctx, bare) })
	if plain > 12 {
		t.Errorf("no key: %v allocs, want <= 12", plain)
	}
	t.Logf("replay %v allocs, no key %v", replay, plain)
}
