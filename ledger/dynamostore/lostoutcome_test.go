package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// The outcome write (success, failure, or an escaped attempt's release)
// is applied and its answer lost, once, twice, or then throttled until the
// SDK gives up; fenced and unfenced. Its SDK retry is recognised as this
// call's own, and Do returns the outcome; when the SDK gives up, Do says
// the outcome may not be recorded (ErrOutcomeNotRecorded), never another
// verdict. Either way the next Do fires nothing and reports what the
// record holds: the success's value or the failure as a replay; the
// escaped attempt is fired again once, under the same provider key, with
// no lease to wait out (the record is released, not left firing). The
// provider performs the effect once.
func TestLostAnswerOutcome(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, fenced := range []bool{false, true} {
			for _, kind := range []string{"success", "failure", "escaped"} {
				for _, c := range dynamotest.Losses("PutItem") {
					t.Run(fencedName(fenced)+"/"+kind+"/"+slug(c.Name), func(t *testing.T) {
						v := newEnv(t, e)
						eff := business(t, "outcome-"+fencedName(fenced)+"-"+kind+"-"+slug(c.Name))
						key := "effect#" + eff.Identity.EffectID
						armed := false
						st := &hookStore{Store: v.store, beforeReplace: func(n *ledger.Record, w ledger.Expect) {
							if !armed && w.State == ledger.StateFiring && n.State != ledger.StateFiring {
								armed = true
								c.Arm(v.faults)
							}
						}}
						l := v.ledgerOn(t, st, func(cfg *ledger.Config) {
							if fenced {
								cfg.Fencer = &counterFencer{}
							}
						})
						calls := 0
						fn := func(ctx context.Context, call ledger.Call) ([]byte, error) {
							calls++
							b, err := v.prov.Call(ctx, call.ProviderKey, "x")
							switch {
							case err != nil:
								return nil, err
							case kind == "failure":
								return nil, errors.New("card declined")
							case kind == "escaped" && calls == 1:
								return nil, ledger.Uncertain(errors.New("no answer"))
							}
							return b, nil
						}
						r, err := l.Do(context.Background(), eff, fn)
						if !armed || v.faults.Pending() != 0 {
							t.Fatalf("fault armed %t, pending %d", armed, v.faults.Pending())
						}
						switch {
						case !c.Landed:
							if !errors.Is(err, ledger.ErrOutcomeNotRecorded) || errors.Is(err, ledger.ErrEffectFailed) || errors.Is(err, ledger.ErrUncertain) {
								t.Fatalf("the SDK gave up on the outcome: %v; want ErrOutcomeNotRecorded and no verdict", err)
							}
						case kind == "success":
							if err != nil || r.Attempt != 1 {
								t.Fatalf("success, answer lost: %+v %v", r, err)
							}
						case kind == "failure":
							if !errors.Is(err, ledger.ErrEffectFailed) {
								t.Fatalf("failure, answer lost: %v; want the failure", err)
							}
						case kind == "escaped":
							if !errors.Is(err, ledger.ErrUncertain) {
								t.Fatalf("escaped, answer lost: %v; want uncertain", err)
							}
						}
						if s, _ := v.states(t, key); s == ledger.StateFiring {
							t.Fatal("the record is left firing: the outcome write landed")
						}
						d, err := l.Do(context.Background(), eff, fn)
						switch kind {
						case "success":
							if err != nil || !d.Replayed || len(d.Value) == 0 || (c.Landed && !bytes.Equal(d.Value, r.Value)) || calls != 1 {
								t.Fatalf("the next Do: %+v %v, calls %d; want the success replayed, no call", d, err, calls)
							}
						case "failure":
							var fe *ledger.FailedError
							if !errors.As(err, &fe) || !fe.Replayed || fe.Message != "card declined" || calls != 1 {
								t.Fatalf("the next Do: %v, calls %d; want the failure replayed, no call", err, calls)
							}
						case "escaped":
							if err != nil || d.Replayed || d.Attempt != 2 || calls != 2 {
								t.Fatalf("the next Do: %+v %v, calls %d; want attempt 2 fired once", d, err, calls)
							}
							if k := v.prov.Keys(); len(k) != 2 || k[0] != k[1] {
								t.Fatalf("provider keys %v; want two calls under one key", k)
							}
						}
						if v.prov.Effects() != 1 {
							t.Fatalf("provider effects %d, want 1", v.prov.Effects())
						}
					})
				}
			}
		}
	})
}
