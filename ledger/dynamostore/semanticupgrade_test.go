package dynamostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/memstore"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// pinSemanticStreamEarlier is the semantic request digest v2 the code
// before RED_TEAM 465 computed for semanticStreamed (computed on that
// code; it hashed "stream" as a provider option). Today's digest of it is
// that of the same request without "stream".
const (
	semanticStreamed         = `{"provider":"openai","model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`
	pinSemanticStreamEarlier = "f2292e6b3ca1468efdcec831fcec04eb752fe29f25ed0a844945c3fe5a275ce7"
)

// TestSemanticDigestChangedAcrossTheUpgrade: an effect recorded by the
// release before 465-468 under the semantic digest that release computed,
// retried by today's code under the same identity with today's digest of
// the same request, is refused with ledger.ErrMismatch (field
// requestDigest) and its provider is not called again, whether the record
// is completed (never replayed either) or still firing (the earlier
// release's call in flight), as docs/GUARANTEES.md's upgrade note says; on
// the memory store and every engine.
func TestSemanticDigestChangedAcrossTheUpgrade(t *testing.T) {
	var req semantic.Request
	if err := json.Unmarshal([]byte(semanticStreamed), &req); err != nil {
		t.Fatal(err)
	}
	today, err := semantic.DigestV2(req)
	if err != nil {
		t.Fatal(err)
	}
	if today == pinSemanticStreamEarlier {
		t.Fatal("today's digest is the earlier release's: nothing changed across the upgrade")
	}
	run := func(t *testing.T, st ledger.Store) {
		l, err := ledger.New(ledger.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var calls atomic.Int32
		for i, firing := range []bool{false, true} {
			runID := "acme/run-000000000000000" + string(rune('1'+i))
			id, err := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: runID, NodeID: "chat", Provider: "openai"})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id, RunID: runID, NodeID: "chat", RequestDigest: pinSemanticStreamEarlier, SemanticRecipe: semantic.RecipeV2}
			held, release := make(chan struct{}), make(chan struct{})
			earlier := make(chan error, 1)
			go func() {
				_, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
					calls.Add(1)
					if firing {
						close(held)
						<-release
					}
					return []byte(`{"text":"hello"}`), nil
				})
				earlier <- err
			}()
			if firing {
				<-held
			} else if err := <-earlier; err != nil {
				t.Fatalf("the earlier release's effect: %v", err)
			}
			eff.RequestDigest = today
			r, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
				calls.Add(1)
				return []byte(`{"text":"again"}`), nil
			})
			var mm *ledger.MismatchError
			if !errors.Is(err, ledger.ErrMismatch) || !errors.As(err, &mm) || mm.Field != "requestDigest" {
				t.Fatalf("firing %v: today's retry: %+v, %v; want ErrMismatch on requestDigest", firing, r, err)
			}
			if firing {
				close(release)
				if err := <-earlier; err != nil {
					t.Fatalf("the earlier release's effect: %v", err)
				}
			}
			if n := calls.Load(); n != int32(i+1) {
				t.Fatalf("firing %v: the provider was called %d times in all, want %d", firing, n, i+1)
			}
		}
	}
	t.Run("memstore", func(t *testing.T) { run(t, memstore.New()) })
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		run(t, newStore(t, e.Client(), e.CreateTable(t, "EffectsTable")))
	})
}
