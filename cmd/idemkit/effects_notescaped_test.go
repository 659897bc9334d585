package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// TestEffectsResolveNotEscapedSaysWhatToDo: resolving an effect that is
// not escaped is refused (exit 1) with one line that says its state and
// what the operator does instead (nothing to resolve for one with an
// outcome; show it again once its lease ends for one in flight), in the
// CLI's words: never the library's error text with its package prefix
// (RED_TEAM 285).
func TestEffectsResolveNotEscapedSaysWhatToDo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		store, _, cli := effectsCLI(t, e)
		l, err := ledger.New(ledger.Config{Store: store, Lease: time.Hour, Heartbeat: -1, Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		refused := func(what, effectID, want string) {
			t.Helper()
			if code, out, _ := cli("effects", "show", effectID); code != 0 {
				t.Fatalf("%s: show: %d %q", what, code, out)
			}
			code, out, errb := cli("effects", "resolve", effectID, "--as", "delivered")
			if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, "not escaped") ||
				strings.Contains(errb, "ledger:") || !strings.Contains(errb, want) {
				t.Fatalf("%s: resolve: exit %d %q %q; want 1 and one line saying the effect is not escaped and %q, without the library's prefix", what, code, out, errb, want)
			}
		}

		done, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-1-" + e.Kind})
		if _, err := l.Do(ctx, ledger.Effect{Identity: done, RunID: "acme/run-0123456789abcdef", NodeID: "charge"},
			func(context.Context, ledger.Call) ([]byte, error) { return []byte("charged"), nil }); err != nil {
			t.Fatal(err)
		}
		refused("completed", done.EffectID, "it is completed: its outcome is recorded, there is nothing to resolve")

		// An attempt that fired and stopped, its hour-long lease still live.
		live, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-2-" + e.Kind})
		func() {
			defer func() { _ = recover() }()
			_, _ = l.Do(ctx, ledger.Effect{Identity: live, RunID: "acme/run-0123456789abcdef", NodeID: "charge"},
				func(context.Context, ledger.Call) ([]byte, error) { panic("executor died") })
		}()
		refused("in flight", live.EffectID, "it is in-flight: an attempt holds its lease and may still record its outcome; show it again once that lease has ended")
	})
}
