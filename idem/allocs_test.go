// The race detector drops sync.Pool items at random, so allocation counts
// mean nothing under it: these pins are built without it only (the allocs
// check step of make test runs them).

//go:build !race

package idem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestReplayAllocations pins the in-process cost of a replay: a 1 KB JSON
// request replayed from the in-memory store through HTTPAPI (header
// parsing, key scope hash, JCS body digest, fingerprint, claim, record
// copy, response building) makes at most replayAllocs heap allocations, the response
// and the in-memory store's copy of the record included (12 before the
// fingerprint, the record ID, the owner token and the raw body's hash
// became one string). The bare adapter path without a key is pinned too.
func TestReplayAllocations(t *testing.T) {
	h := replayHandler(t)
	ctx := context.Background()
	replay := replayAllocsOf(t, h, v2event("POST", "POST /runs", testKey, body1KB()))
	if replay > replayAllocs {
		t.Errorf("1 KB replay: %v allocs, want <= %d", replay, replayAllocs)
	}
	bare := v2event("POST", "POST /runs", "", body1KB())
	plain := testing.AllocsPerRun(200, func() { h(ctx, bare) })
	if plain > noKeyAllocs {
		t.Errorf("no key: %v allocs, want <= %d", plain, noKeyAllocs)
	}
	t.Logf("replay %v allocs, no key %v", replay, plain)
}

// TestReplayAllocationsOnARouteServingAnyMethod pins that a key scoped by
// the request's method (a PUT on an "ANY" route with a long path) costs a
// replay nothing more than the 1 KB replay of TestReplayAllocations: the
// method is hashed beside the route, never joined to it in a new string.
func TestReplayAllocationsOnARouteServingAnyMethod(t *testing.T) {
	ev := v2event("PUT", "ANY /orders/{orderId}/refunds/{refundId}", testKey, body1KB())
	if replay := replayAllocsOf(t, replayHandler(t), ev); replay > replayAllocs {
		t.Errorf("1 KB replay of a PUT on an ANY route: %v allocs, want <= %d", replay, replayAllocs)
	}
}

// replayHandler is the HTTPAPI handler the replay pins measure, over the
// in-memory store.
func replayHandler(t *testing.T) idem.HTTPAPIHandler {
	t.Helper()
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return g.HTTPAPI(benchHandler)
}

// replayAllocsOf runs ev once through h, then measures the allocations of
// its replays.
func replayAllocsOf(t *testing.T, h idem.HTTPAPIHandler, ev events.APIGatewayV2HTTPRequest) float64 {
	t.Helper()
	ctx := context.Background()
	if r, _ := h(ctx, ev); r.StatusCode != 201 {
		t.Fatalf("first execution: %d %s", r.StatusCode, r.Body)
	}
	return testing.AllocsPerRun(200, func() {
		if r, _ := h(ctx, ev); r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] != "true" {
			t.Fatalf("replay: %d %v", r.StatusCode, r.Headers)
		}
	})
}

// TestFirstExecutionAllocations pins the in-process cost of a first
// execution (claim, handler, completion) of a 1 KB JSON request through
// HTTPAPI with the in-memory store, both outside Lambda (the lease
// heartbeat runs) and inside a Lambda invocation that ends before the
// lease (no heartbeat). The handler's own allocations (its response and
// header map) are included (19 and 17 before the fingerprint, the record
// ID, the owner token and the raw body's hash became one string; 17 and
// 15 before the in-memory store kept a response's headers as a list
// instead of a map per record; 15 and 13 before it kept the response in
// the record's own entry; 14 and 12 before it kept a record as one byte
// slice that its completion writes in place). Each run uses a new key;
// the store's growth is amortised over the runs.
func TestFirstExecutionAllocations(t *testing.T) {
	const runs = 400
	measure := func(ctx context.Context, prefix string) float64 {
		g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		h := g.HTTPAPI(benchHandler)
		ev := v2event("POST", "POST /runs", testKey, body1KB())
		keys := make([]string, runs+1)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s_%020d", prefix, i)
		}
		n := 0
		return testing.AllocsPerRun(runs, func() {
			ev.Headers["idempotency-key"] = keys[n]
			n++
			if r, _ := h(ctx, ev); r.StatusCode != 201 || r.Headers["Openwop-Idempotent-Replay"] == "true" {
				t.Fatalf("first execution: %d %v", r.StatusCode, r.Headers)
			}
		})
	}
	outside := measure(context.Background(), "ko")
	lctx, cancel := context.WithTimeout(lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "allocs"}), 30*time.Second)
	defer cancel()
	inside := measure(lctx, "kl")
	if outside > firstExecutionAllocs {
		t.Errorf("1 KB first execution: %v allocs, want <= %d", outside, firstExecutionAllocs)
	}
	if inside > firstExecutionInLambdaAllocs {
		t.Errorf("1 KB first execution inside Lambda: %v allocs, want <= %d", inside, firstExecutionInLambdaAllocs)
	}
	t.Logf("first execution %v allocs, inside Lambda %v", outside, inside)
}

// TestReplayAllocationsOfABodyReadByItsMediaType pins that the body's media
// type in the fingerprint (RED_TEAM 313) costs a replay nothing more than
// the 1 KB JSON replay of TestReplayAllocations: a form, text in a charset,
// a JSON type in capitals and another JSON type, the media type put in
// its canonical form without a heap allocation once it was seen (RED_TEAM
// 334; before: 15 and 18 allocations for the form and the text, 10 for
// the capitals).
func TestReplayAllocationsOfABodyReadByItsMediaType(t *testing.T) {
	for _, ct := range []string{
		"application/x-www-form-urlencoded",
		"text/plain; charset=UTF-8",
		"multipart/form-data; boundary=b1",
		"Application/JSON",
		"application/merge-patch+json",
		"Application/Merge-Patch+JSON; charset=utf-8",
	} {
		ev := v2event("POST", "POST /runs", testKey, body1KB())
		ev.Headers["content-type"] = ct
		if replay := replayAllocsOf(t, replayHandler(t), ev); replay > replayAllocs {
			t.Errorf("1 KB replay sent as %q: %v allocs, want <= %d", ct, replay, replayAllocs)
		}
	}
}

// TestReplayAllocationsWithAMethodOverride pins that a method-override
// header in the fingerprint (RED_TEAM 314) costs a replay nothing more
// than the 1 KB replay of TestReplayAllocations (RED_TEAM 335; before: 11).
func TestReplayAllocationsWithAMethodOverride(t *testing.T) {
	ev := v2event("POST", "POST /runs", testKey, body1KB())
	ev.Headers["x-http-method-override"] = "PUT"
	ev.Headers["x-method-override"] = "PUT"
	if replay := replayAllocsOf(t, replayHandler(t), ev); replay > replayAllocs {
		t.Errorf("1 KB replay tunnelling PUT: %v allocs, want <= %d", replay, replayAllocs)
	}
}
