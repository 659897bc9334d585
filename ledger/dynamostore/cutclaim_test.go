package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
)

// cutAPI holds the one record PutItem it is armed for until the caller of
// Do has gone (gone closed): a call whose context ended with it is then
// answered its context's error and applied later, when apply is called (a
// request the client gave up on that the server still applies, after the
// writes the client made next); a call whose context did not end is
// applied and answered at once.
type cutAPI struct {
	dynamostore.API
	gone <-chan struct{}
	held chan struct{} // closed once the armed write is held

	mu      sync.Mutex
	armed   func(cond string) bool // the write to hold, by its condition
	pending []func()
}

func (a *cutAPI) arm(which func(cond string) bool) {
	a.mu.Lock()
	a.armed = which
	a.mu.Unlock()
}

func (a *cutAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	a.mu.Lock()
	sk, _ := in.Item["sk"].(*types.AttributeValueMemberS)
	held := a.armed != nil && sk != nil && sk.Value == "record" && in.ConditionExpression != nil && a.armed(*in.ConditionExpression)
	if held {
		a.armed = nil
	}
	a.mu.Unlock()
	if !held {
		return a.API.PutItem(ctx, in, opts...)
	}
	close(a.held)
	<-a.gone // the caller goes away while the write is on the way
	if err := ctx.Err(); err != nil {
		a.mu.Lock()
		a.pending = append(a.pending, func() { _, _ = a.API.PutItem(context.Background(), in, opts...) })
		a.mu.Unlock()
		return nil, err
	}
	return a.API.PutItem(ctx, in, opts...)
}

// apply applies the writes answered with their caller's error.
func (a *cutAPI) apply() int {
	a.mu.Lock()
	p := a.pending
	a.pending = nil
	a.mu.Unlock()
	for _, f := range p {
		f()
	}
	return len(p)
}

// A Do whose caller goes away while its claim (or its reclaim of a
// released effect) is on the way never calls the effect function, and
// leaves nothing in flight: the next Do fires at once, once, and the cut
// attempt is shown released, never escaped. Before (RED_TEAM 534), the
// claim's call ended with the caller's context and its give-back was
// written before the claim landed, finding nothing of its own; the claim
// then landed, so every Do of the effect was refused as in flight for the
// whole lease, after which (without a Fencer, the claim being the fire
// mark) the attempt that never called the provider was reported escaped
// and counted in the escaped metric.
func TestClaimCutByItsCallerIsGivenBackAfterItLands(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, fenced := range []bool{false, true} {
			for _, step := range []string{"claim", "reclaim"} {
				t.Run(fencedName(fenced)+"/"+step, func(t *testing.T) {
					v := newEnv(t, e)
					callerCtx, gone := context.WithCancel(context.Background())
					defer gone()
					api := &cutAPI{API: e.Client(v.faults.Middleware(), dynamotest.FastRetries), gone: callerCtx.Done(), held: make(chan struct{})}
					st := newStore(t, api, e.CreateTable(t, "EffectsTable"))
					l := v.ledgerOn(t, st, func(cfg *ledger.Config) {
						if fenced {
							cfg.Fencer = &counterFencer{}
						}
					})
					eff := business(t, "cut-"+fencedName(fenced)+"-"+step)
					key := "effect#" + eff.Identity.EffectID
					calls := 0
					fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
						calls++
						return v.prov.Call(ctx, call.ProviderKey, "x")
					}
					cut := 1
					if step == "reclaim" {
						notSent := func(context.Context, ledger.Call) ([]byte, error) {
							return nil, ledger.NotSent(errors.New("connection refused"))
						}
						if _, err := l.Do(context.Background(), eff, notSent); !errors.Is(err, ledger.ErrNotSent) {
							t.Fatalf("first Do: %v; want not sent", err)
						}
						cut = 2
					}
					api.arm(func(cond string) bool {
						if step == "claim" {
							return strings.HasPrefix(cond, "attribute_not_exists")
						}
						return strings.HasPrefix(cond, "#o = :o")
					})
					go func() {
						// Gone once the write is on the way: the
						// PutItem waits for it, so no timing is involved.
						<-api.held
						gone()
					}()
					_, err := l.Do(callerCtx, eff, fn)
					if !errors.Is(err, context.Canceled) || calls != 0 {
						t.Fatalf("the cut Do: %v, calls %d; want the context's error, nothing sent", err, calls)
					}
					late := api.apply()
					r, err := l.Do(context.Background(), eff, fn)
					if err != nil || r.Replayed || r.Attempt != cut+1 || calls != 1 {
						t.Fatalf("the next Do (%d late writes applied): %+v %v, calls %d; want attempt %d fired at once, once", late, r, err, calls, cut+1)
					}
					rec, err := st.Get(context.Background(), key)
					if err != nil || rec == nil {
						t.Fatalf("record: %v %v", rec, err)
					}
					if a := rec.Attempts[cut-1]; a.State != ledger.AttemptReleased || a.Fired {
						t.Fatalf("the cut attempt %d: %s, fired %t; want released, unfired", cut, a.State, a.Fired)
					}
					if v.prov.Effects() != 1 {
						t.Fatalf("provider effects %d, want 1", v.prov.Effects())
					}
				})
			}
		}
	})
}
