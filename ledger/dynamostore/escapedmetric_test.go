package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// The escaped metric counts each attempt that became escaped once: when
// its function's "may have reached the provider" (ErrUncertain) is
// recorded, or when a reclaim marks it escaped, never both. Before, Do
// counted an uncertain attempt before its outcome write: when that write
// failed (the attempt stays firing, and the reclaim after its lease marks
// it escaped) or was fenced (another executor had already reclaimed it as
// escaped), the one escaped attempt was counted twice.
func TestEscapedCountedOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		uncertain := ledger.Uncertain(errors.New("no answer from the provider"))
		succeed := func(ctx context.Context, c ledger.Call) ([]byte, error) { return []byte("ok"), nil }
		for _, c := range []struct {
			name string
			// first is attempt 1's function; l the ledger it runs on.
			first func(v *env, l *ledger.Ledger, eff ledger.Effect) ledger.Func
		}{
			{"outcome write failed", func(v *env, _ *ledger.Ledger, _ ledger.Effect) ledger.Func {
				return func(ctx context.Context, c ledger.Call) ([]byte, error) {
					v.faults.FailNext("PutItem", 1, errors.New("injected: process killed"))
					return nil, uncertain
				}
			}},
			{"outcome write fenced", func(v *env, l *ledger.Ledger, eff ledger.Effect) ledger.Func {
				return func(ctx context.Context, c ledger.Call) ([]byte, error) {
					// Stalled past its lease: another executor reclaims
					// the attempt (escaped) and records its outcome.
					v.clock.Advance(31 * time.Second)
					if r, err := l.Do(context.Background(), eff, succeed); err != nil || r.Attempt != 2 {
						t.Errorf("the reclaim: %+v %v", r, err)
					}
					return nil, uncertain
				}
			}},
		} {
			t.Run(slug(c.name), func(t *testing.T) {
				v := newEnv(t, e)
				m := &countMetrics{}
				l := v.ledgerOn(t, v.store, func(cfg *ledger.Config) { cfg.Metrics = m })
				eff := business(t, "escaped-once-"+slug(c.name))
				if _, err := l.Do(context.Background(), eff, c.first(v, l, eff)); err == nil {
					t.Fatal("attempt 1 succeeded")
				}
				v.faults.Clear()
				v.clock.Advance(31 * time.Second)
				r, err := l.Do(context.Background(), eff, succeed)
				if err != nil || r.Attempt != 2 {
					t.Fatalf("after attempt 1: %+v %v; want attempt 2's success", r, err)
				}
				_, states := v.states(t, "effect#"+eff.Identity.EffectID)
				escaped := 0
				for _, s := range states {
					if s == ledger.AttemptEscaped {
						escaped++
					}
				}
				if got := m.get(ledger.MetricEscaped); escaped != 1 || got != escaped {
					t.Fatalf("attempts %v; %s counted %d, want one per escaped attempt (%d)", states, ledger.MetricEscaped, got, escaped)
				}
			})
		}
	})
}
