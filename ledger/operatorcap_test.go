package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// An operator's ledger (`idemkit effects`, built with the defaults) reads
// an effect made by executors whose Config.MaxAttempts is not the default,
// with no Retry of its own: it sees the cap the executors stop at. Before,
// such a record carried no cap, and the operator's view took its own
// (DefaultMaxAttempts): an escaped effect the executors had given up on
// was shown "attempt 3 of 50", not exhausted, its next attempt "any
// time", and an exhausted pending one (its attempts since the one that
// fired never reached the provider) was refused a not-delivered
// resolution as "pending", while every Do returned the exhausted error:
// the effect could not move again until its record passed its retention.
func TestOperatorSeesTheExecutorsAttemptCap(t *testing.T) {
	for _, c := range []struct {
		name  string
		end   func(error) error
		state ledger.EffectState
	}{
		{"escaped", ledger.Uncertain, ledger.EffectEscaped},
		{"pending", ledger.NotSent, ledger.EffectPending},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := ledgertest.NewClock(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC))
			st := memstore.New()
			exec, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, MaxAttempts: 3, Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			op, err := ledger.New(ledger.Config{Store: st, Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-cap-" + c.name})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id}
			ctx := context.Background()
			fired := 0
			for i := 0; i < 3; i++ {
				_, err := exec.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
					fired++
					return nil, c.end(errors.New("no answer"))
				})
				if err == nil {
					t.Fatalf("attempt %d succeeded", i+1)
				}
				clk.Advance(time.Second)
			}
			if _, err := exec.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
				t.Fatal("fired past the executor's cap")
				return nil, nil
			}); !errors.Is(err, ledger.ErrAttemptsExhausted) {
				t.Fatalf("after 3 attempts: %v; want attempts exhausted", err)
			}
			v, err := op.ShowEffect(ctx, id.EffectID)
			if err != nil {
				t.Fatal(err)
			}
			if v.State != c.state || v.MaxAttempts != 3 || !v.Exhausted || !v.NextAttemptAt.IsZero() {
				t.Fatalf("operator's view: %s, attempt %d of %d, exhausted %v, next %v; want %s, 3 of 3, exhausted, none",
					v.State, v.Attempt, v.MaxAttempts, v.Exhausted, v.NextAttemptAt, c.state)
			}
			if _, err := op.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); err != nil {
				t.Fatalf("not-delivered resolution: %v", err)
			}
			r, err := exec.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
				fired++
				return []byte("charged"), nil
			})
			if err != nil || r.Replayed || string(r.Value) != "charged" || fired != 4 {
				t.Fatalf("the granted attempt: %+v %v, fired %d; want it fired once more (4)", r, err, fired)
			}
		})
	}
}

// flakyFencer refuses its first fail tokens (a fence table out of reach),
// then issues increasing ones.
type flakyFencer struct {
	fail int
	n    uint64
}

func (f *flakyFencer) Token(context.Context, string) (uint64, error) {
	if f.fail > 0 {
		f.fail--
		return 0, errors.New("fence table unreachable")
	}
	f.n++
	return f.n, nil
}

// cancelAfterClaim cancels the caller's context once a claim (or reclaim)
// has landed: the executor's invocation ends right after it.
type cancelAfterClaim struct {
	ledger.Store
	cancel context.CancelFunc
}

func (s *cancelAfterClaim) Create(ctx context.Context, r *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	won, cur, err := s.Store.Create(ctx, r, now)
	if won {
		s.cancel()
	}
	return won, cur, err
}

func (s *cancelAfterClaim) Replace(ctx context.Context, n *ledger.Record, w ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	ok, cur, err := s.Store.Replace(ctx, n, w, now)
	if ok && n.State != ledger.StateReleased {
		s.cancel()
	}
	return ok, cur, err
}

// An effect whose every attempt up to its cap ended before its point of
// no return (the fence out of reach for its token, or the executor's
// invocation ending right after its claim) is exhausted, pending, and
// nothing of it ever reached the provider: a not-delivered resolution,
// true by construction, grants it one more attempt, which fires once.
// Before, the resolution was refused ("it is pending") as for an effect
// that had never been tried, while every Do returned the exhausted error:
// after a fence outage as long as an effect's tries, nothing but its
// record's retention could move it again.
func TestExhaustedEffectThatNeverFiredTakesANotDeliveredResolution(t *testing.T) {
	for _, c := range []string{"fence unreachable", "invocation ended after the claim"} {
		t.Run(slugOf(c), func(t *testing.T) {
			clk := ledgertest.NewClock(time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC))
			st := memstore.New()
			cfg := ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}}
			ctxs := func() (context.Context, ledger.Store) { return context.Background(), st }
			if c == "fence unreachable" {
				cfg.Fencer = &flakyFencer{fail: 3}
			} else {
				ctxs = func() (context.Context, ledger.Store) {
					ctx, cancel := context.WithCancel(context.Background())
					return ctx, &cancelAfterClaim{Store: st, cancel: cancel}
				}
			}
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-never-" + slugOf(c)})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id, Retry: &ledger.Retry{MaxAttempts: 3}}
			fired := 0
			fn := func(context.Context, ledger.Call) ([]byte, error) { fired++; return []byte("charged"), nil }
			for i := 0; i < 3; i++ {
				ctx, s := ctxs()
				c := cfg
				c.Store = s
				l, err := ledger.New(c)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.Do(ctx, eff, fn); err == nil {
					t.Fatalf("attempt %d: no error", i+1)
				}
				// Past the backoff a fence outage's release is given
				// (RED_TEAM 328): each Do makes an attempt.
				clk.Advance(10 * time.Minute)
			}
			l, err := ledger.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := l.Do(ctx, eff, fn); !errors.Is(err, ledger.ErrAttemptsExhausted) || fired != 0 {
				t.Fatalf("after 3 attempts that never fired: %v, fired %d; want attempts exhausted, nothing fired", err, fired)
			}
			v, err := l.ShowEffect(ctx, id.EffectID)
			if err != nil || v.State != ledger.EffectPending || !v.Exhausted {
				t.Fatalf("view %s exhausted %v (%v); want pending, exhausted", v.State, v.Exhausted, err)
			}
			if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops", Rev: v.Rev}); !errors.Is(err, ledger.ErrNotEscaped) {
				t.Fatalf("delivered for an effect that never fired: %v; want ErrNotEscaped", err)
			}
			if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); err != nil {
				t.Fatalf("not-delivered for an exhausted effect that never fired: %v", err)
			}
			r, err := l.Do(ctx, eff, fn)
			if err != nil || r.Replayed || fired != 1 {
				t.Fatalf("the granted attempt: %+v %v, fired %d; want it fired once", r, err, fired)
			}
		})
	}
}

func slugOf(s string) string { return strings.ReplaceAll(s, " ", "-") }
