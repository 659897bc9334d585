package dynamostore_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// Eight executors, each with a client of its own, claim one effect at
// once; every executor's first claim is applied with its answer lost (the
// SDK retries it), and so is its first read. The effect function runs
// once; its success, a value too large for the record item (kept beside
// it), is what every executor gets, the seven duplicates from the record
// once it is written; the record holds one attempt, completed.
func TestParallelClaimsUnderLostAnswers(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "EffectsTable")
		eff := business(t, "parallel-lost-1")
		value := bytes.Repeat([]byte("v"), 5000)
		var calls atomic.Int32
		const n = 8
		var wg sync.WaitGroup
		results := make([]ledger.Result, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			f := dynamotest.NewFaults()
			f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			f.FailNextAfterSend("GetItem", 1, dynamotest.ResponseLost())
			st := newStore(t, e.Client(f.Middleware(), dynamotest.FastRetries), table)
			l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: 20 * time.Second, PollInterval: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
					calls.Add(1)
					time.Sleep(100 * time.Millisecond)
					return value, nil
				})
			}()
		}
		close(start)
		wg.Wait()
		if c := calls.Load(); c != 1 {
			t.Fatalf("the effect function ran %d times; want once", c)
		}
		replayed := 0
		for i := range n {
			if errs[i] != nil || !bytes.Equal(results[i].Value, value) || results[i].Attempt != 1 {
				t.Fatalf("executor %d: %+v %v; want the one success, attempt 1", i, results[i], errs[i])
			}
			if results[i].Replayed {
				replayed++
			}
		}
		if replayed != n-1 {
			t.Fatalf("%d replays; want %d", replayed, n-1)
		}
		rec, err := newStore(t, e.Client(), table).Get(context.Background(), "effect#"+eff.Identity.EffectID)
		if err != nil || rec == nil || rec.State != ledger.StateCompleted || len(rec.Attempts) != 1 || !bytes.Equal(rec.Outcome.Value, value) {
			t.Fatalf("record %s: %v; want completed, one attempt, the value", fmt.Sprint(rec), err)
		}
	})
}
