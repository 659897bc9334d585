package dynamostore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// recordingAPI keeps the store's UpdateItem inputs.
type recordingAPI struct {
	dynamostore.API
	mu      sync.Mutex
	ops     []string
	updates []*dynamodb.UpdateItemInput
}

func (r *recordingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.mu.Lock()
	r.ops = append(r.ops, "PutItem")
	r.mu.Unlock()
	return r.API.PutItem(ctx, in, o...)
}

func (r *recordingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.mu.Lock()
	r.ops = append(r.ops, "UpdateItem")
	r.updates = append(r.updates, in)
	r.mu.Unlock()
	return r.API.UpdateItem(ctx, in, o...)
}

// The fire mark and the outcome are narrow, fenced UpdateItems: they carry
// the owner/attempt/state/retention condition, and none of the record's
// identity (effect id, provider key, recipes, tenant, creating run), which
// a Replace never changes; the record read back is the one Do reports.
// A reclaim (a new attempt by a new owner) rewrites every mutable
// attribute and the attempts list whole.
func TestReplaceWritesOnlyWhatChanges(t *testing.T) {
	identity := []string{"effectId", "providerKey", "identityRecipe", "semanticRecipe", "requestDigest", "tenant", "keying", "kind", "runKey", "createdAt", "pk", "sk"}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		api := &recordingAPI{API: e.Client()}
		st := dynamostore.New(api, e.CreateTable(t, "EffectsTable"))
		clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}})
		if err != nil {
			t.Fatal(err)
		}
		eff := business(t, "narrow-1")
		if _, err := l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
			return []byte(`{"id":"ch_1"}`), nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(api.ops, []string{"PutItem", "UpdateItem", "UpdateItem"}) {
			t.Fatalf("first effect: %v; want the claim PutItem, then the fire mark and the outcome UpdateItems", api.ops)
		}
		for i, in := range api.updates {
			cond := *in.ConditionExpression
			for _, p := range []string{"#o = :o", "#a = :a", "#s = :s", "#e > :n"} {
				if !strings.Contains(cond, p) {
					t.Errorf("update %d: condition %q lacks %q", i, cond, p)
				}
			}
			for _, name := range in.ExpressionAttributeNames {
				if slices.Contains(identity, name) {
					t.Errorf("update %d writes identity attribute %s: %s", i, name, *in.UpdateExpression)
				}
			}
			if strings.Contains(*in.UpdateExpression, "REMOVE") || strings.Contains(*in.UpdateExpression, "#A = ") {
				t.Errorf("update %d of the same attempt: %s; want only its own row", i, *in.UpdateExpression)
			}
		}
		rec, err := st.Get(context.Background(), "effect#"+eff.Identity.EffectID)
		if err != nil || rec == nil {
			t.Fatal(rec, err)
		}
		if rec.State != ledger.StateCompleted || rec.Outcome == nil || string(rec.Outcome.Value) != `{"id":"ch_1"}` ||
			len(rec.Attempts) != 1 || !rec.Attempts[0].Fired || rec.Attempts[0].State != ledger.AttemptCompleted ||
			rec.EffectID != eff.Identity.EffectID || rec.ProviderKey != eff.Identity.ProviderKey || rec.RunID != eff.RunID {
			t.Fatalf("record after the narrow writes: %+v", rec)
		}

		// A reclaim after a stalled fire: every mutable attribute, the
		// attempts list whole, the retry schedule removed.
		stalled := business(t, "narrow-2")
		ctx, cancel := context.WithCancel(context.Background())
		_, _ = l.Do(ctx, stalled, func(context.Context, ledger.Call) ([]byte, error) {
			cancel()
			return nil, ledger.Uncertain(context.Canceled)
		})
		clock.Advance(31 * time.Second)
		api.updates = nil
		if r, err := l.Do(context.Background(), stalled, func(context.Context, ledger.Call) ([]byte, error) { return []byte("v"), nil }); err != nil || r.Attempt != 2 {
			t.Fatalf("second attempt: %+v %v", r, err)
		}
		if len(api.updates) != 3 || !strings.Contains(*api.updates[0].UpdateExpression, "#A = :r") {
			t.Fatalf("reclaim updates: %d, first %q", len(api.updates), *api.updates[0].UpdateExpression)
		}
		rec, _ = st.Get(context.Background(), "effect#"+stalled.Identity.EffectID)
		var states []ledger.AttemptState
		for _, a := range rec.Attempts {
			states = append(states, a.State)
		}
		if rec.Attempt != 2 || !slices.Equal(states, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) || !rec.NotBefore.IsZero() {
			t.Fatalf("after the reclaim: attempt %d, rows %v, notBefore %v", rec.Attempt, states, rec.NotBefore)
		}
	})
}
