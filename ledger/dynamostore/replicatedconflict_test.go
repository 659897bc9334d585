package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// replicatedConflict is the refusal an MRSC table gives a write that meets
// a write of the same item in another Region: a client fault the SDK's
// standard retryer does not retry; the write did not land.
func replicatedConflict() error {
	return &types.ReplicatedWriteConflictException{Message: aws.String("injected: the item is being modified by a request in another Region")}
}

// Each write of Do's hot path (the claim, the fire mark a Fencer adds,
// the outcome, and the release of an attempt not sent) refused with
// ReplicatedWriteConflictException is a store failure whose write did not
// land: Do returns an error and no verdict (never the effect's failure,
// never a lost claim or an effect in flight that would let it fire again
// under another key), and the next Do, after the lease, ends the effect
// with the provider performing it once. On the emulators.
func TestReplicatedWriteConflictOnTheHotPathIsAnOutage(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, fc := range []struct {
			fenced bool
			kind   string
		}{{false, "success"}, {false, "not sent first"}, {true, "success"}, {true, "not sent first"}} {
			fenced, kind := fc.fenced, fc.kind
			for k := 0; ; k++ {
				v := newEnv(t, e)
				l := v.ledgerOn(t, v.store, func(cfg *ledger.Config) {
					if fenced {
						cfg.Fencer = &counterFencer{}
					}
				})
				kind := fencedName(fenced) + " " + kind
				eff := business(t, fmt.Sprintf("rwc-%s-%d", slug(kind), k))
				v.faults.PassNext("PutItem", k)
				v.faults.FailNext("PutItem", 1, replicatedConflict())
				firstDo := true
				fn := func(ctx context.Context, c ledger.Call) ([]byte, error) {
					if strings.HasSuffix(kind, "not sent first") && firstDo {
						return nil, ledger.NotSent(errors.New("connection refused"))
					}
					return v.prov.Call(ctx, c.ProviderKey, "x")
				}
				_, err := l.Do(context.Background(), eff, fn)
				if v.faults.Fired() == 0 {
					v.faults.Clear()
					if k == 0 {
						t.Fatalf("%s: no PutItem refused", kind)
					}
					t.Logf("%s: %d writes refused in turn", kind, k)
					break // past the last write of the path
				}
				if err == nil && strings.HasSuffix(kind, "success") {
					t.Fatalf("%s, write %d refused: Do succeeded; want the store failure", kind, k+1)
				}
				for _, verdict := range []error{ledger.ErrEffectFailed, ledger.ErrUncertain, ledger.ErrLeaseLost, ledger.ErrMismatch, ledger.ErrAttemptsExhausted} {
					if errors.Is(err, verdict) {
						t.Fatalf("%s, write %d refused: %v; want a store failure, not %v", kind, k+1, err, verdict)
					}
				}
				firstDo = false
				v.clock.Advance(2 * time.Minute) // past the lease of a claim left firing
				r, err := l.Do(context.Background(), eff, fn)
				if err != nil {
					t.Fatalf("%s, write %d refused, then Do again: %v", kind, k+1, err)
				}
				if v.prov.Effects() != 1 {
					t.Fatalf("%s, write %d refused: the provider performed the effect %d times (%+v); want once", kind, k+1, v.prov.Effects(), r)
				}
			}
		}
	})
}
