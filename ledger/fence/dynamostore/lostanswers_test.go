package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdyn "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// fworld: an effects table (no faults) and a fence table whose client
// carries faults, one manual clock.
type fworld struct {
	clock   *ledgertest.Clock
	faults  *dynamotest.Faults
	fstore  *dynamostore.Store
	effects *ledgerdyn.Store
	prov    *ledgertest.Provider
	e       *dynamotest.Emulator
	ftable  string
}

func newFWorld(t *testing.T, e *dynamotest.Emulator) *fworld {
	w := &fworld{clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)), faults: dynamotest.NewFaults(),
		prov: ledgertest.NewProvider(t), e: e}
	w.ftable = e.CreateTable(t, "FenceTable")
	w.fstore = newStore(t, e.Client(w.faults.Middleware(), dynamotest.FastRetries), w.ftable)
	st, err := ledgerdyn.New(ledgerdyn.Config{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "EffectsTable")})
	if err != nil {
		t.Fatal(err)
	}
	w.effects = st
	return w
}

func (w *fworld) owner(t *testing.T, st fence.Store, retention time.Duration) *fence.Owner {
	o, err := fence.New(fence.Config{Store: st, Region: "eu-west-1", Now: w.clock.Now, Retention: retention})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func (w *fworld) ledger(t *testing.T, f ledger.Fencer, heartbeat time.Duration) *ledger.Ledger {
	l, err := ledger.New(ledger.Config{Store: w.effects, Fencer: f, Lease: 30 * time.Second, Heartbeat: heartbeat, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: w.clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func effectOf(t *testing.T, key string) ledger.Effect {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Effect{Identity: id}
}

func slug(s string) string { return strings.ReplaceAll(s, " ", "-") }

// Keep (the ledger asks the fence to keep the token's item as long as an
// escaped attempt's record) is applied and its answer lost. With the
// fence keeping items exactly as long as the ledger keeps records, an
// escaped call that took 20 s needs it. The escaped record must never be
// kept past the fence's item (else a Do after the item ends takes a new
// token and fires the escaped effect again), and when Keep landed the
// record keeps its full retention. No Do fires it again while it is kept.
func TestLostAnswerFenceKeep(t *testing.T) {
	const day = 24 * time.Hour
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range dynamotest.Losses("UpdateItem") {
			t.Run(c.Name, func(t *testing.T) {
				w := newFWorld(t, e)
				o := w.owner(t, w.fstore, ledger.MinRetention)
				l := w.ledger(t, o, -1)
				eff := effectOf(t, "keep-"+slug(c.Name))
				id := eff.Identity.EffectID
				if _, err := l.Do(context.Background(), eff, o.Guard(func(ctx context.Context, call ledger.Call) ([]byte, error) {
					_, _ = w.prov.Call(ctx, call.ProviderKey, "x")
					w.clock.Advance(20 * time.Second)
					c.Arm(w.faults) // the next fence write is Keep
					return nil, ledger.Uncertain(errors.New("no answer after 20 s"))
				})); !errors.Is(err, ledger.ErrUncertain) {
					t.Fatalf("Do: %v", err)
				}
				if w.faults.Pending() != 0 {
					t.Fatalf("Keep not reached: %d faults pending", w.faults.Pending())
				}
				rec, err := l.Lookup(context.Background(), id)
				if err != nil || rec == nil {
					t.Fatal(rec, err)
				}
				it, err := w.fstore.Get(context.Background(), id)
				if err != nil || it == nil || it.Passed == nil {
					t.Fatalf("fence item %+v %v", it, err)
				}
				if rec.ExpiresAt.After(it.ExpiresAt) {
					t.Fatalf("the escaped record is kept to %s, the fence's pass only to %s", rec.ExpiresAt, it.ExpiresAt)
				}
				if want := w.clock.Now().Add(ledger.MinRetention); c.Landed && !rec.ExpiresAt.Equal(want) {
					t.Fatalf("Keep landed but the record is kept to %s, want %s (it was treated as failed)", rec.ExpiresAt, want)
				}
				base := w.clock.Now()
				for _, at := range []time.Duration{time.Minute, day, rec.ExpiresAt.Sub(base) - time.Second} {
					w.clock.Set(base.Add(at))
					_, err := l.Do(context.Background(), eff, o.Guard(func(ctx context.Context, call ledger.Call) ([]byte, error) {
						return w.prov.Call(ctx, call.ProviderKey, "x")
					}))
					if w.prov.Requests() != 1 || !errors.Is(err, fence.ErrIssued) {
						t.Fatalf("Do %s later: %v, provider requests %d; want ErrIssued and no fire", at, err, w.prov.Requests())
					}
				}
			})
		}
	})
}

// reopenHook runs before ahead of the next Reopen (once).
type reopenHook struct {
	fence.Store
	before func()
}

func (s *reopenHook) Reopen(ctx context.Context, id string, tok uint64) (bool, *fence.Item, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.Store.Reopen(ctx, id, tok)
}

// An attempt whose token passed but whose function did not send (NotSent)
// is released; the next attempt finds the fence refusing, reopens it for
// that token and takes a new one. That Reopen is applied and its answer
// lost: the next attempt fires once (or, when the SDK gave up, the one
// after it), the reopened token never passes again, and every duplicate
// gets the outcome.
func TestLostAnswerFenceReopenUnsent(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range dynamotest.Losses("UpdateItem") {
			t.Run(c.Name, func(t *testing.T) {
				w := newFWorld(t, e)
				armed := false
				o := w.owner(t, &reopenHook{Store: w.fstore, before: func() { armed = true; c.Arm(w.faults) }}, 0)
				l := w.ledger(t, o, -1)
				eff := effectOf(t, "reopen-"+slug(c.Name))
				id := eff.Identity.EffectID
				var t1 uint64
				if _, err := l.Do(context.Background(), eff, o.Guard(func(_ context.Context, call ledger.Call) ([]byte, error) {
					t1 = call.Fence
					return nil, ledger.NotSent(errors.New("connection refused"))
				})); !errors.Is(err, ledger.ErrNotSent) {
					t.Fatalf("attempt 1: %v", err)
				}
				calls := 0
				fn := o.Guard(func(ctx context.Context, call ledger.Call) ([]byte, error) {
					calls++
					return w.prov.Call(ctx, call.ProviderKey, "x")
				})
				r, err := l.Do(context.Background(), eff, fn)
				if !armed || w.faults.Pending() != 0 {
					t.Fatalf("Reopen armed %t, pending %d", armed, w.faults.Pending())
				}
				if c.Landed {
					if err != nil || r.Attempt != 2 || calls != 1 {
						t.Fatalf("attempt 2 after a reopen whose answer was lost: %+v %v calls %d", r, err, calls)
					}
				} else {
					if err == nil || calls != 0 {
						t.Fatalf("attempt 2 whose reopen's SDK retries gave up: %+v %v calls %d; want an error, no fire", r, err, calls)
					}
					if r, err = l.Do(context.Background(), eff, fn); err != nil || calls != 1 {
						t.Fatalf("attempt 3: %+v %v calls %d", r, err, calls)
					}
				}
				if d, err := l.Do(context.Background(), eff, fn); err != nil || !d.Replayed || string(d.Value) != string(r.Value) || calls != 1 {
					t.Fatalf("duplicate %+v %v calls %d", d, err, calls)
				}
				if err := o.Pass(context.Background(), id, t1); !errors.Is(err, fence.ErrStale) {
					t.Fatalf("the reopened token %d passed again: %v", t1, err)
				}
				if w.prov.Requests() != 1 {
					t.Fatalf("provider requests %d", w.prov.Requests())
				}
			})
		}
	})
}

// afterSend is client middleware: the nth attempt of op on this client is
// sent (the engine applies it), then between runs, then the attempt
// returns a lost answer (lose) so that the SDK retries it, or its real
// answer.
type afterSend struct {
	op      string
	n       int
	lose    bool
	between func()
	mu      sync.Mutex
	seen    int
}

func (h *afterSend) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("test.afterSend",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if middleware.GetOperationName(ctx) != h.op {
					return next.HandleFinalize(ctx, in)
				}
				h.mu.Lock()
				h.seen++
				hit := h.seen == h.n
				h.mu.Unlock()
				out, md, err := next.HandleFinalize(ctx, in)
				if !hit {
					return out, md, err
				}
				h.between()
				if h.lose {
					return middleware.FinalizeOutput{}, md, dynamotest.ResponseLost()
				}
				return out, md, err
			}), middleware.After)
	})
}

// A not-delivered resolution reopens the fence of an escaped attempt Z
// (token t1). Z is a paused executor (the stale owner a fence exists
// for): its Pass(t1) was applied, its answer lost, and its SDK retry is
// still on its way; it lands right after the operator's Reopen(t1)
// applied. The Reopen retires t1 (the fence's newest token moves past
// it), so Z's late pass is refused and Z calls nothing; had t1 stayed the
// newest token, Z's retry would pass and fire, and the Reopen's own SDK
// retry (its answer lost) would find "passed = t1" again and erase Z's
// pass unseen, letting the next attempt fire a second time. Exactly one
// attempt fires, whether the Reopen's answer arrives or is lost.
func TestLostAnswerFenceReopenAfterAStalePass(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, lose := range []bool{false, true} {
			name := "reopen answered"
			if lose {
				name = "reopen answer lost"
			}
			t.Run(name, func(t *testing.T) {
				w := newFWorld(t, e)
				eff := effectOf(t, "reopen-stale-"+slug(name))
				id := eff.Identity.EffectID
				var fires atomic.Int32
				passApplied, releasePass := make(chan struct{}), make(chan struct{})
				zFired, releaseZ, zExit := make(chan struct{}), make(chan struct{}), make(chan struct{})
				var zErr error

				// Z: its 2nd fence UpdateItem (Acquire, then Pass) is
				// applied, then Z pauses; on release its answer is lost
				// and the SDK's retry is sent.
				zh := &afterSend{op: "UpdateItem", n: 2, lose: true, between: func() { close(passApplied); <-releasePass }}
				oz := w.owner(t, newStore(t, w.e.Client(zh.option, dynamotest.FastRetries), w.ftable), 0)
				lz := w.ledger(t, oz, -1)
				go func() {
					defer close(zExit)
					_, zErr = lz.Do(context.Background(), eff, oz.Guard(func(ctx context.Context, call ledger.Call) ([]byte, error) {
						fires.Add(1)
						b, err := w.prov.Call(ctx, call.ProviderKey, "x")
						close(zFired)
						<-releaseZ
						return b, err
					}))
				}()
				select {
				case <-passApplied:
				case <-time.After(2 * time.Minute):
					t.Fatal("Z's pass was never sent")
				}
				w.clock.Advance(31 * time.Second) // Z's lease ends: its attempt is escaped

				// The operator: the first fence UpdateItem on its client
				// is Reopen(t1); Z's retried Pass lands after it applied.
				oh := &afterSend{op: "UpdateItem", n: 1, lose: lose, between: func() {
					close(releasePass)
					select {
					case <-zFired:
					case <-zExit:
					case <-time.After(2 * time.Minute):
					}
				}}
				ow := w.owner(t, newStore(t, w.e.Client(oh.option, dynamotest.FastRetries), w.ftable), 0)
				lw := w.ledger(t, ow, -1)
				v, err := lw.ShowEffect(context.Background(), id)
				if err != nil || v.State != ledger.EffectEscaped {
					t.Fatalf("view %s %v; want escaped", v.State, err)
				}
				_, err = lw.Resolve(context.Background(), id, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev})
				t.Logf("Resolve: %v; Z fired: %d", err, fires.Load())
				it, _ := w.fstore.Get(context.Background(), id)
				t.Logf("fence after the resolution: token %d, passed %+v", it.Token, it.Passed)

				next := ow.Guard(func(ctx context.Context, call ledger.Call) ([]byte, error) {
					fires.Add(1)
					return w.prov.Call(ctx, call.ProviderKey, "x")
				})
				w.clock.Advance(time.Minute)
				_, err = lw.Do(context.Background(), eff, next)
				t.Logf("next attempt: %v", err)
				close(releaseZ)
				<-zExit
				t.Logf("Z: %v", zErr)
				w.clock.Advance(time.Minute)
				_, err = lw.Do(context.Background(), eff, next)
				t.Logf("one more attempt: %v", err)
				if n := fires.Load(); n != 1 {
					t.Fatalf("%d attempts fired (provider requests %d), want exactly 1", n, w.prov.Requests())
				}
			})
		}
	})
}

// A not-delivered resolution of an escaped, fenced effect reopens the
// fence first, and that Reopen is applied with its answer lost. When the
// SDK's retry recognises the reopen, the resolution is recorded. When the
// SDK gave up (lost, then throttled), the fence may have been reopened
// without the resolution being recorded: the error says so and that
// resolving again records it; resolving again does; and the effect's
// next try then fires exactly once.
func TestLostAnswerResolveReopen(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range dynamotest.Losses("UpdateItem") {
			t.Run(c.Name, func(t *testing.T) {
				w := newFWorld(t, e)
				o := w.owner(t, w.fstore, 0)
				l := w.ledger(t, o, -1)
				eff := effectOf(t, "resolve-reopen-"+slug(c.Name))
				id := eff.Identity.EffectID
				ctx := context.Background()
				if _, err := l.Do(ctx, eff, o.Guard(func(context.Context, ledger.Call) ([]byte, error) {
					return nil, ledger.Uncertain(errors.New("timeout after the request was sent"))
				})); err == nil {
					t.Fatal("an uncertain call succeeded")
				}
				v, err := l.ShowEffect(ctx, id)
				if err != nil || v.State != ledger.EffectEscaped {
					t.Fatalf("view %s %v; want escaped", v.State, err)
				}
				c.Arm(w.faults)
				_, err = l.Resolve(ctx, id, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev})
				if w.faults.Pending() != 0 {
					t.Fatalf("faults pending %d", w.faults.Pending())
				}
				if c.Landed {
					if err != nil {
						t.Fatalf("resolution whose reopen's answer was lost: %v", err)
					}
				} else {
					if err == nil || !strings.Contains(err.Error(), "may have been reopened") || !strings.Contains(err.Error(), "resolve again") {
						t.Fatalf("resolution whose reopen's SDK retries gave up: %v; want an error saying the fence may have been reopened and to resolve again", err)
					}
					if v, err = l.ShowEffect(ctx, id); err != nil || v.State != ledger.EffectEscaped {
						t.Fatalf("view after the failed resolution %s %v; want still escaped", v.State, err)
					}
					if _, err = l.Resolve(ctx, id, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); err != nil {
						t.Fatalf("resolving again: %v", err)
					}
				}
				calls := 0
				fn := o.Guard(func(ctx context.Context, call ledger.Call) ([]byte, error) {
					calls++
					return w.prov.Call(ctx, call.ProviderKey, "x")
				})
				if _, err := l.Do(ctx, eff, fn); err != nil || calls != 1 {
					t.Fatalf("the next try after the resolution: %v, calls %d; want one fire", err, calls)
				}
				if d, err := l.Do(ctx, eff, fn); err != nil || !d.Replayed || calls != 1 {
					t.Fatalf("duplicate %+v %v calls %d", d, err, calls)
				}
			})
		}
	})
}
