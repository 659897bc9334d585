package ledger_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// TestLedgerTracesClaimProviderCallRecord: with a TracerProvider, Do
// records a span for the claim, the provider call and the record (the
// OpenTelemetry API, here a recording provider), each with the keying, the
// attempt and the outcome and never the effect id or the provider key; a
// duplicate records only its claim span, whose outcome is the replay; an
// attempt whose delivery is unknown shows as escaped in both the call's
// and the record's span.
func TestLedgerTracesClaimProviderCallRecord(t *testing.T) {
	spans := &testutil.Spans{}
	l, err := ledger.New(ledger.Config{Store: memstore.New(), TracerProvider: spans, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-1"})
	ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("charged"), nil }
	if _, err := l.Do(ctx, ledger.Effect{Identity: id}, ok); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Do(ctx, ledger.Effect{Identity: id}, ok); err != nil || !res.Replayed {
		t.Fatalf("duplicate: %+v %v", res, err)
	}
	lost, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-2"})
	unknown := func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	}
	if _, err := l.Do(ctx, ledger.Effect{Identity: lost}, unknown); err == nil {
		t.Fatal("an uncertain attempt returned no error")
	}

	type want struct{ name, outcome string }
	var got []want
	for _, sp := range spans.Ended() {
		got = append(got, want{sp.Name, sp.Attrs["idemkit.outcome"]})
		if sp.Attrs["idemkit.keying"] != string(identity.KeyingBusinessIdentity) || sp.Attrs["idemkit.attempt"] != "1" || sp.Error {
			t.Errorf("span %+v: want keying %s, attempt 1, no error", sp, identity.KeyingBusinessIdentity)
		}
		for k, v := range sp.Attrs {
			if strings.Contains(v, id.EffectID) || strings.Contains(v, id.ProviderKey) || strings.Contains(v, lost.EffectID) {
				t.Errorf("span %s attribute %s names the effect", sp.Name, k)
			}
		}
	}
	expect := []want{
		{"idemkit.ledger.claim", "claimed"}, {"idemkit.ledger.provider_call", "completed"}, {"idemkit.ledger.record", "completed"},
		{"idemkit.ledger.claim", "replay"},
		{"idemkit.ledger.claim", "claimed"}, {"idemkit.ledger.provider_call", "escaped"}, {"idemkit.ledger.record", "escaped"},
	}
	if !slices.Equal(got, expect) {
		t.Fatalf("spans\n %v\nwant\n %v", got, expect)
	}

	// A store that fails: the claim's span is an error, and its status
	// does not name the effect.
	down := &testutil.Spans{}
	l, err = ledger.New(ledger.Config{Store: failingStore{memstore.New()}, TracerProvider: down, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Do(ctx, ledger.Effect{Identity: id}, ok); err == nil {
		t.Fatal("a failing store returned no error")
	}
	ended := down.Ended()
	if len(ended) != 1 || ended[0].Name != "idemkit.ledger.claim" || !ended[0].Error || ended[0].Attrs["idemkit.outcome"] != "error" ||
		strings.Contains(ended[0].Status, id.EffectID) {
		t.Fatalf("failing store: spans %+v, want one failed claim span without the effect id", ended)
	}
}

// failingStore fails every claim the way an unreachable store does.
type failingStore struct{ ledger.Store }

func (failingStore) Create(context.Context, *ledger.Record, time.Time) (bool, *ledger.Record, error) {
	return false, nil, errors.New("store unreachable")
}
