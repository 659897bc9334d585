package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// hookStore runs hooks around a ledger.Store's writes (to arm faults for
// exactly one write).
type hookStore struct {
	ledger.Store
	afterCreate   func(won bool)
	beforeReplace func(next *ledger.Record, want ledger.Expect)
}

func (s *hookStore) Create(ctx context.Context, r *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	won, cur, err := s.Store.Create(ctx, r, now)
	if s.afterCreate != nil && err == nil {
		s.afterCreate(won)
	}
	return won, cur, err
}

func (s *hookStore) Replace(ctx context.Context, n *ledger.Record, w ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if s.beforeReplace != nil {
		s.beforeReplace(n, w)
	}
	return s.Store.Replace(ctx, n, w, now)
}

// countMetrics counts every metric by name.
type countMetrics struct {
	mu sync.Mutex
	n  map[string]int
}

func (m *countMetrics) Count(name string, n float64, _ map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int{}
	}
	m.n[name] += int(n)
}

func (m *countMetrics) get(name string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[name]
}

func (v *env) ledgerOn(t *testing.T, st ledger.Store, mod func(*ledger.Config)) *ledger.Ledger {
	t.Helper()
	cfg := ledger.Config{Store: st, Lease: 30 * time.Second, Heartbeat: -1, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: v.clock.Now}}}
	if mod != nil {
		mod(&cfg)
	}
	l, err := ledger.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (v *env) states(t *testing.T, key string) (ledger.State, []ledger.AttemptState) {
	t.Helper()
	rec, err := v.store.Get(context.Background(), key)
	if err != nil || rec == nil {
		t.Fatalf("record %s: %v %v", key, rec, err)
	}
	var s []ledger.AttemptState
	for _, a := range rec.Attempts {
		s = append(s, a.State)
	}
	return rec.State, s
}

func fencedName(fenced bool) string {
	if fenced {
		return "fenced"
	}
	return "unfenced"
}

func slug(s string) string { return strings.ReplaceAll(s, " ", "-") }

// killedAfterProvider is attempt 1: it fires the provider and dies before
// its outcome is written (the outcome PutItem fails, not retried).
func (v *env) killedAfterProvider(t *testing.T, l *ledger.Ledger, eff ledger.Effect) {
	t.Helper()
	if _, err := l.Do(context.Background(), eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		b, err := v.prov.Call(ctx, c.ProviderKey, "x")
		v.faults.FailNext("PutItem", 1, errors.New("injected: process killed"))
		return b, err
	}); err == nil {
		t.Fatal("attempt 1 recorded its outcome")
	}
	v.faults.Clear()
}

// The reclaim of an expired claim (a conditional PutItem taking over the
// stalled attempt) is applied and its answer lost: the SDK's retry fails
// its condition against the reclaim itself, which must count as won. The
// function runs once, the provider sees one effect, every duplicate gets
// the recorded outcome, the witness shows the stalled attempt escaped and
// nothing stays firing. When the SDK gives up (lost, then throttled), Do
// fires nothing and gives back the attempt the reclaim wrote, unfired
// (released), so the next Do fires it once.
func TestLostAnswerReclaim(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, fenced := range []bool{false, true} {
			for _, c := range dynamotest.Losses("PutItem") {
				t.Run(fencedName(fenced)+"/"+c.Name, func(t *testing.T) {
					v := newEnv(t, e)
					eff := business(t, "reclaim-"+fencedName(fenced)+"-"+slug(c.Name))
					key := "effect#" + eff.Identity.EffectID
					armed := false
					st := &hookStore{Store: v.store, beforeReplace: func(n *ledger.Record, w ledger.Expect) {
						if !armed && n.Attempt == 2 && w.Attempt == 1 && w.LeaseExpired {
							armed = true
							c.Arm(v.faults)
						}
					}}
					var mod func(*ledger.Config)
					if fenced {
						f := &counterFencer{}
						mod = func(c *ledger.Config) { c.Fencer = f }
					}
					l := v.ledgerOn(t, st, mod)
					v.killedAfterProvider(t, l, eff)
					v.clock.Advance(31 * time.Second)

					calls := 0
					fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
						calls++
						return v.prov.Call(ctx, call.ProviderKey, "x")
					}
					r, err := l.Do(context.Background(), eff, fn)
					if !armed || v.faults.Pending() != 0 {
						t.Fatalf("fault armed %t, pending %d", armed, v.faults.Pending())
					}
					wantStates := []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}
					if c.Landed {
						if err != nil || r.Replayed || r.Attempt != 2 || calls != 1 {
							t.Fatalf("reclaim with a lost answer: %+v %v calls %d; want attempt 2 fired once", r, err, calls)
						}
					} else {
						if err == nil || calls != 0 {
							t.Fatalf("reclaim whose SDK retries gave up: %+v %v calls %d; want an error and no fire", r, err, calls)
						}
						if s, _ := v.states(t, key); s == ledger.StateCompleted {
							t.Fatalf("state %s", s)
						}
						if r, err = l.Do(context.Background(), eff, fn); err != nil || r.Attempt != 3 || calls != 1 {
							t.Fatalf("after the landed reclaim was given back: %+v %v calls %d; want attempt 3 fired once, no lease to wait out", r, err, calls)
						}
						// Written firing (unfenced) or claimed (fenced), the
						// landed reclaim never called the function: released.
						wantStates = []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptReleased, ledger.AttemptCompleted}
					}
					d, err := l.Do(context.Background(), eff, fn)
					if err != nil || !d.Replayed || !bytes.Equal(d.Value, r.Value) || calls != 1 {
						t.Fatalf("duplicate %+v %v calls %d; want the recorded %q", d, err, calls, r.Value)
					}
					s, got := v.states(t, key)
					if s != ledger.StateCompleted || !slices.Equal(got, wantStates) {
						t.Fatalf("record %s %v; want completed %v", s, got, wantStates)
					}
					if v.prov.Effects() != 1 {
						t.Fatalf("provider effects %d, want 1", v.prov.Effects())
					}
				})
			}
		}
	})
}

// release() gives back a claim whose function was never called (Do's ctx
// ended right after the claim). Its write is applied and its answer lost
// (the write is best effort, its result ignored): the record must be
// released with the attempt released and unfired, so the next Do fires at
// once (no lease to wait out), exactly once.
func TestLostAnswerRelease(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cases := append(dynamotest.Losses("PutItem"), dynamotest.Loss{Name: "lost three times", Arm: func(f *dynamotest.Faults) {
			f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
		}})
		for _, fenced := range []bool{false, true} {
			for _, c := range cases {
				t.Run(fencedName(fenced)+"/"+c.Name, func(t *testing.T) {
					v := newEnv(t, e)
					eff := business(t, "release-"+fencedName(fenced)+"-"+slug(c.Name))
					key := "effect#" + eff.Identity.EffectID
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					armed := false
					st := &hookStore{Store: v.store, afterCreate: func(won bool) {
						if won && !armed {
							armed = true
							c.Arm(v.faults)
							cancel()
						}
					}}
					var mod func(*ledger.Config)
					if fenced {
						f := &counterFencer{}
						mod = func(c *ledger.Config) { c.Fencer = f }
					}
					l := v.ledgerOn(t, st, mod)
					calls := 0
					fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
						calls++
						return v.prov.Call(ctx, call.ProviderKey, "x")
					}
					if _, err := l.Do(ctx, eff, fn); !errors.Is(err, context.Canceled) || calls != 0 {
						t.Fatalf("Do cancelled after its claim: %v calls %d", err, calls)
					}
					if !armed || v.faults.Pending() != 0 {
						t.Fatalf("fault armed %t, pending %d", armed, v.faults.Pending())
					}
					rec, _ := v.store.Get(context.Background(), key)
					if a := rec.Attempts[0]; rec.State != ledger.StateReleased || a.State != ledger.AttemptReleased || a.Fired {
						t.Fatalf("record after the release %s, attempt %+v; want released, unfired", rec.State, a)
					}
					r, err := l.Do(context.Background(), eff, fn) // no clock advance
					if err != nil || r.Attempt != 2 || calls != 1 {
						t.Fatalf("next Do %+v %v calls %d; want attempt 2 at once", r, err, calls)
					}
					if d, err := l.Do(context.Background(), eff, fn); err != nil || !d.Replayed || calls != 1 || v.prov.Effects() != 1 {
						t.Fatalf("duplicate %+v %v calls %d effects %d", d, err, calls, v.prov.Effects())
					}
					if s, got := v.states(t, key); s != ledger.StateCompleted || !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}) {
						t.Fatalf("record %s %v", s, got)
					}
				})
			}
		}
	})
}

// The close-out of an effect at its attempt cap (MaxAttempts 1, the only
// attempt stalled after it fired) is applied and its answer lost: Do
// fires nothing, the stalled attempt is escaped in a released record, the
// close-out is counted once, and every later Do answers
// AttemptsExhausted without firing.
func TestLostAnswerExhaustedCloseOut(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range dynamotest.Losses("PutItem") {
			t.Run(c.Name, func(t *testing.T) {
				v := newEnv(t, e)
				eff := business(t, "exhausted-"+slug(c.Name))
				key := "effect#" + eff.Identity.EffectID
				m := &countMetrics{}
				armed := false
				st := &hookStore{Store: v.store, beforeReplace: func(n *ledger.Record, w ledger.Expect) {
					if !armed && n.State == ledger.StateReleased && w.LeaseExpired && n.Attempt == w.Attempt {
						armed = true
						c.Arm(v.faults)
					}
				}}
				l := v.ledgerOn(t, st, func(c *ledger.Config) { c.MaxAttempts = 1; c.Metrics = m })
				v.killedAfterProvider(t, l, eff)
				v.clock.Advance(31 * time.Second)
				calls := 0
				fn := func(context.Context, ledger.Call) ([]byte, error) { calls++; return nil, nil }
				_, err := l.Do(context.Background(), eff, fn)
				if !armed || v.faults.Pending() != 0 {
					t.Fatalf("fault armed %t, pending %d", armed, v.faults.Pending())
				}
				var ex *ledger.AttemptsExhaustedError
				if c.Landed && (!errors.As(err, &ex) || !ex.Escaped) {
					t.Fatalf("close-out with a lost answer: %v; want AttemptsExhausted (escaped)", err)
				}
				if err == nil || calls != 0 {
					t.Fatalf("close-out: %v calls %d", err, calls)
				}
				for i := range 2 {
					v.clock.Advance(time.Minute)
					if _, err := l.Do(context.Background(), eff, fn); !errors.As(err, &ex) || !ex.Escaped || calls != 0 {
						t.Fatalf("Do %d after the close-out: %v calls %d", i, err, calls)
					}
				}
				if s, got := v.states(t, key); s != ledger.StateReleased || !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped}) {
					t.Fatalf("record %s %v; want released [escaped]", s, got)
				}
				// When the SDK gave up, the close-out landed uncounted
				// (the executor cannot know it did): 0 is tolerated.
				if n := m.get(ledger.MetricReclaims); n > 1 || (c.Landed && n != 1) {
					t.Errorf("close-out counted %d times in %s, want 1", n, ledger.MetricReclaims)
				}
				if v.prov.Effects() != 1 {
					t.Fatalf("provider effects %d", v.prov.Effects())
				}
			})
		}
	})
}

// A success whose value does not fit the record's write unit is stored in
// an item of its own beside the record (an unconditional PutItem before the
// record's). Either write is applied and its answer lost: the outcome is
// recorded once, the caller gets the value, every duplicate gets the same
// bytes and nothing stays firing. When the SDK gives up on the value write,
// the outcome is not recorded (Do fails, the attempt stays firing); after
// the lease the next attempt fires with the same provider key (one
// provider effect) and records it. When it gives up on the record write,
// the record was written: the duplicate replays it.
func TestLostAnswerValueBeside(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, which := range []string{"value item", "record item"} {
			for _, c := range dynamotest.Losses("PutItem") {
				t.Run(which+"/"+c.Name, func(t *testing.T) {
					v := newEnv(t, e)
					eff := business(t, "beside-"+slug(which)+"-"+slug(c.Name))
					key := "effect#" + eff.Identity.EffectID
					l := v.ledgerOn(t, v.store, nil)
					big := func(p []byte) []byte { return bytes.Repeat(append(p, '.'), 4096/(len(p)+1)+1) }
					calls := 0
					armed := false
					fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
						calls++
						b, err := v.prov.Call(ctx, call.ProviderKey, "x")
						if !armed {
							armed = true
							if which == "record item" {
								v.faults.PassNext("PutItem", 1) // the value item
							}
							c.Arm(v.faults)
						}
						return big(b), err
					}
					r, err := l.Do(context.Background(), eff, fn)
					if v.faults.Pending() != 0 {
						t.Fatalf("pending %d", v.faults.Pending())
					}
					if len(r.Value) <= 1024 {
						t.Fatalf("value of %d bytes would not be kept beside the record", len(r.Value))
					}
					want := r.Value
					switch {
					case c.Landed:
						if err != nil || calls != 1 {
							t.Fatalf("Do: %v calls %d", err, calls)
						}
					case which == "record item":
						// Applied, but the SDK gave up: Do cannot know.
						if err == nil || calls != 1 {
							t.Fatalf("Do: %v calls %d; want the store's error", err, calls)
						}
					default:
						if err == nil || calls != 1 {
							t.Fatalf("Do: %v calls %d; want the store's error", err, calls)
						}
						if s, _ := v.states(t, key); s != ledger.StateFiring {
							t.Fatalf("state %s, want firing (outcome unrecorded)", s)
						}
						v.clock.Advance(31 * time.Second)
						r2, err := l.Do(context.Background(), eff, fn)
						if err != nil || r2.Attempt != 2 || calls != 2 || r2.ProviderKey != r.ProviderKey {
							t.Fatalf("after the lease: %+v %v calls %d", r2, err, calls)
						}
						want = r2.Value
					}
					for i := range 2 {
						d, err := l.Do(context.Background(), eff, fn)
						if err != nil || !d.Replayed || !bytes.Equal(d.Value, want) {
							t.Fatalf("duplicate %d: replayed %t, %d bytes (want %d), %v", i, d.Replayed, len(d.Value), len(want), err)
						}
					}
					if s, _ := v.states(t, key); s != ledger.StateCompleted || v.prov.Effects() != 1 {
						t.Fatalf("state %s effects %d", s, v.prov.Effects())
					}
					rec, err := v.store.Get(context.Background(), key)
					if err != nil || !bytes.Equal(rec.Outcome.Value, want) {
						t.Fatalf("Get: %v, %d bytes", err, len(rec.Outcome.Value))
					}
				})
			}
		}
	})
}

// Under a Fencer the fire mark is a write of its own after the claim (the
// token must be checked by it). It is applied and its answer lost: the
// SDK's retry recognises it, and the function runs once. When the SDK
// gives up (lost, then throttled), the function was never called, so the
// attempt must not be left firing (it would be reported escaped once its
// lease ended, an operator's question about an effect that never left):
// Do gives the attempt back unfired, and the next Do fires at once, once.
func TestLostAnswerFireMark(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range dynamotest.Losses("PutItem") {
			t.Run(c.Name, func(t *testing.T) {
				v := newEnv(t, e)
				eff := business(t, "fire-mark-"+slug(c.Name))
				key := "effect#" + eff.Identity.EffectID
				armed := false
				st := &hookStore{Store: v.store, beforeReplace: func(n *ledger.Record, w ledger.Expect) {
					if !armed && n.State == ledger.StateFiring && w.State == ledger.StateClaimed {
						armed = true
						c.Arm(v.faults)
					}
				}}
				f := &counterFencer{}
				l := v.ledgerOn(t, st, func(c *ledger.Config) { c.Fencer = f })
				calls := 0
				fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
					calls++
					return v.prov.Call(ctx, call.ProviderKey, "x")
				}
				r, err := l.Do(context.Background(), eff, fn)
				if !armed || v.faults.Pending() != 0 {
					t.Fatalf("fault armed %t, pending %d", armed, v.faults.Pending())
				}
				want := []ledger.AttemptState{ledger.AttemptCompleted}
				if c.Landed {
					if err != nil || r.Attempt != 1 || calls != 1 {
						t.Fatalf("fire mark with a lost answer: %+v %v calls %d; want attempt 1 fired once", r, err, calls)
					}
				} else {
					if err == nil || calls != 0 {
						t.Fatalf("fire mark whose SDK retries gave up: %+v %v calls %d; want an error and no fire", r, err, calls)
					}
					if s, got := v.states(t, key); s != ledger.StateReleased || !slices.Equal(got, []ledger.AttemptState{ledger.AttemptReleased}) {
						t.Fatalf("record %s %v after a fire mark the executor cannot know landed, its function never called; want released [released]", s, got)
					}
					if r, err = l.Do(context.Background(), eff, fn); err != nil || r.Attempt != 2 || calls != 1 {
						t.Fatalf("the next Do: %+v %v calls %d; want attempt 2 fired once, no lease to wait out", r, err, calls)
					}
					want = []ledger.AttemptState{ledger.AttemptReleased, ledger.AttemptCompleted}
				}
				if d, err := l.Do(context.Background(), eff, fn); err != nil || !d.Replayed || !bytes.Equal(d.Value, r.Value) || calls != 1 {
					t.Fatalf("duplicate %+v %v calls %d", d, err, calls)
				}
				if s, got := v.states(t, key); s != ledger.StateCompleted || !slices.Equal(got, want) {
					t.Fatalf("record %s %v; want completed %v", s, got, want)
				}
				if v.prov.Effects() != 1 {
					t.Fatalf("provider effects %d, want 1", v.prov.Effects())
				}
			})
		}
	})
}
