package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
)

// TestEffectsResolveFencedFromCLI: under fenced-effects an escaped effect
// whose token passed the fence is refused by the fence on every later
// attempt; resolving it as not-delivered without the fence table is
// refused (nothing written), and with it the fence is reopened for that
// token: the one more attempt fires once, with the same provider key.
func TestEffectsResolveFencedFromCLI(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
		t.Setenv("IDEMKIT_OPERATOR", "ops@acme")
		table, fenceTable := e.CreateTable(t, "EffectsTable"), e.CreateTable(t, "FenceTable")
		store, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(), Table: table})
		if err != nil {
			t.Fatal(err)
		}
		fs, err := fencedynamo.New(fencedynamo.Config{Client: e.Client(), Table: fenceTable})
		if err != nil {
			t.Fatal(err)
		}
		owner, err := fence.New(fence.Config{Store: fs})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: store, Fencer: owner, Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-43-" + e.Kind})
		eff := ledger.Effect{Identity: id, RunID: "acme/run-0123456789fenced", NodeID: "charge"}
		calls := 0
		fire := owner.Guard(func(_ context.Context, c ledger.Call) ([]byte, error) {
			if c.ProviderKey != id.ProviderKey {
				t.Errorf("provider key %q, want %q", c.ProviderKey, id.ProviderKey)
			}
			calls++
			return []byte("ok"), nil
		})
		if _, err := l.Do(ctx, eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("timeout"))
		})); !errors.Is(err, ledger.ErrUncertain) {
			t.Fatalf("first attempt: %v", err)
		}
		if _, err := l.Do(ctx, eff, fire); !errors.Is(err, fence.ErrIssued) || calls != 0 {
			t.Fatalf("attempt after the escape: %v, %d calls; want ErrIssued, none", err, calls)
		}
		cli := func(args ...string) (int, string, string) {
			var out, errb strings.Builder
			code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
			return code, out.String(), errb.String()
		}
		if code, out, errb := cli("effects", "show", id.EffectID); code != 0 || !strings.Contains(out, "escaped") {
			t.Fatalf("show: %d %q %q", code, out, errb)
		}
		if code, _, errb := cli("effects", "resolve", id.EffectID, "--as", "not-delivered"); code != 1 || !strings.Contains(errb, "--fence-table") {
			t.Fatalf("resolve without the fence: %d %q", code, errb)
		}
		if code, out, errb := cli("effects", "resolve", id.EffectID, "--as", "not-delivered", "--fence-table", fenceTable); code != 0 ||
			!strings.Contains(out, "as not-delivered by ops@acme") {
			t.Fatalf("resolve with the fence: %d %q %q", code, out, errb)
		}
		for range 2 {
			if _, err := l.Do(ctx, eff, fire); err != nil || calls != 1 {
				t.Fatalf("after the resolution: %v, %d calls; want one", err, calls)
			}
		}
	})
}
