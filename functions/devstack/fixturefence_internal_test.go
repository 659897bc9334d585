package devstack

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencemem "github.com/idemkit/idemkit/ledger/fence/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// TestFixtureSideEffectIsFencedUnderFencedEffects: under
// CROSS_REGION=fenced-effects the kit's ledger takes a fencing token for
// every attempt and the kit's webhook passes the fence (fence.Owner.Guard)
// just before each request, so an attempt that ended uncertain (its
// request may have been performed) is never sent again until an operator
// resolves it. A graph fixture's side-effecting node that names no
// inputs.url is delivered by dev's fixture sender, on the same ledger: it
// must pass the same fence, or the escaped attempt's next try is issued a
// token (no pass was recorded) and the request is sent a second time.
func TestFixtureSideEffectIsFencedUnderFencedEffects(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	owner, err := fence.New(fence.Config{Store: fencemem.New(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Fencer: owner, Lease: 30 * time.Second, Wait: -1,
		Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	// The kit as kit.NewKit builds it under fenced-effects.
	k := &kit.Kit{Ledger: l, Webhook: &webhook.Webhook{Ledger: l, Wrap: owner.Guard}}

	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // performed or not: the sender cannot tell
	}))
	defer srv.Close()

	run := runs.NewRun("acme", webhook.WorkflowReplaySideEffect, nil, clk.Now())
	payload := []byte(`{"runId":"` + run.ID + `","nodeId":"effect","execution":1}`)
	w := fixtureWebhook(k)
	ctx := context.Background()
	if _, err := w.DeliverNode(ctx, run, "effect", 0, srv.URL, payload); !errors.Is(err, ledger.ErrRetryLater) {
		t.Fatalf("first try: %v, want a retry scheduled after the 503", err)
	}
	clk.Advance(10 * time.Minute) // past the backoff
	_, err = w.DeliverNode(ctx, run, "effect", 0, srv.URL, payload)
	if n := requests.Load(); n != 1 {
		t.Fatalf("the fixture received %d requests, want 1: the escaped attempt's next try was sent unfenced (%v)", n, err)
	}
	if !errors.Is(err, ledger.ErrPassHeld) {
		t.Fatalf("next try: %v, want the fence's refusal (ErrPassHeld)", err)
	}
}
