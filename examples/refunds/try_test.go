package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// TestTryCrash: a worker crashes after the provider got the refund, before
// the outcome was recorded. The next delivery, once the crashed claim's
// lease has expired, sends the refund again with the same Idempotency-Key
// (a provider that deduplicates refunds once); every later delivery gets
// the recorded outcome and sends nothing.
func TestTryCrash(t *testing.T) {
	if os.Getenv("DYNAMODB_ENDPOINT") == "" {
		t.Skip("set DYNAMODB_ENDPOINT to the DynamoDB endpoint idemkit dev prints, EFFECTS_TABLE=idemkit-EffectsTable and EFFECT_LEASE_SECONDS=1")
	}
	ctx := context.Background()
	l, err := newLedger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: fmt.Sprintf("order-%d", time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	var sent []string // the Idempotency-Key of each request the provider received
	provider := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		sent = append(sent, c.ProviderKey)
		if len(sent) == 1 {
			panic("the worker crashed after sending")
		}
		return []byte(`{"refund":"re_1"}`), nil
	}
	func() {
		defer func() { t.Logf("delivery 1: %v", recover()) }()
		_, _ = l.Do(ctx, ledger.Effect{Identity: id}, provider)
	}()
	for d := 2; d <= 3; d++ { // SQS redelivers the message
		r, err := l.Do(ctx, ledger.Effect{Identity: id}, provider)
		if err != nil {
			t.Fatalf("delivery %d: %v", d, err)
		}
		t.Logf("delivery %d: %s replayed=%v", d, r.Value, r.Replayed)
	}
	t.Logf("the provider received %d requests, with one Idempotency-Key: %v", len(sent), len(sent) == 2 && sent[0] == sent[1])
	if len(sent) != 2 || sent[0] != sent[1] {
		t.Fatalf("provider requests %v", sent)
	}
}
