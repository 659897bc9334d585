package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/event"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// sqsRuns counts runs per message id.
type sqsRuns struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *sqsRuns) add(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[id]++
}

func (r *sqsRuns) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return fmt.Sprint(r.n)
}

func batchOf(ids ...string) events.SQSEvent {
	var ev events.SQSEvent
	for _, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m-" + id, Body: `{"order":"` + id + `"}`,
			EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders", Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	return ev
}

func failures(r events.SQSEventResponse) string {
	var s []string
	for _, f := range r.BatchItemFailures {
		s = append(s, f.ItemIdentifier)
	}
	return strings.Join(s, ",")
}

// killable stands for a process that dies: once dead, nothing it sends
// reaches DynamoDB.
type killable struct {
	idem.Store
	dead atomic.Bool
}

var errDead = errors.New("process died")

func (s *killable) Claim(ctx context.Context, r idem.Record, now time.Time) (idem.ClaimResult, error) {
	if s.dead.Load() {
		return idem.ClaimResult{}, errDead
	}
	return s.Store.Claim(ctx, r, now)
}
func (s *killable) Complete(ctx context.Context, claim idem.Record, o idem.Outcome, now time.Time) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Complete(ctx, claim, o, now)
}
func (s *killable) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Release(ctx, claim, now)
}

func sqsGuard(t *testing.T, st idem.Store, clk *clock.Manual, wait time.Duration) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: st, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}}, Wait: wait,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// On DynamoDB (moto and dynalite): a redelivered batch runs nothing again
// and reports only the record that still fails; four invocations handling
// the same batch at once process every message once; the store round trips
// per record are the HTTP adapters' (2 first, 1 replay).
func TestSQSOnDynamoDB(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(time.Now())
		t.Run("RedeliveredBatch", func(t *testing.T) {
			var runs sqsRuns
			var flaky atomic.Bool
			flaky.Store(true)
			h, err := event.SQS(sqsGuard(t, v.s, clk, 5*time.Second), event.SQSConfig{Operation: "ship-" + rnd(4), Concurrency: 3},
				func(ctx context.Context, m events.SQSMessage) error {
					runs.add(m.MessageId)
					if m.MessageId == "m-4" && flaky.Load() {
						return errors.New("carrier down")
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			ev := batchOf("1", "2", "3", "4", "5")
			v.cnt.Reset()
			r, _ := h(ctxT(t), ev)
			if failures(r) != "m-4" {
				t.Fatalf("first delivery: %q", failures(r))
			}
			// Four completions (PutItem) and one release (UpdateItem).
			if got := v.cnt.Ops(); got["PutItem"] != 9 || got["UpdateItem"] != 1 {
				t.Fatalf("round trips %v: want one claim and one complete/release per record", got)
			}
			// A replay of a completed message costs what an HTTP replay does:
			// one round trip (two where the emulator does not return the
			// item with a failed condition).
			done := batchOf("1", "2", "3", "5")
			v.cnt.Reset()
			if r, _ := h(ctxT(t), done); failures(r) != "" {
				t.Fatalf("replayed batch: %q", failures(r))
			}
			perReplay := 1
			if !e.Caps.ReturnValuesOnConditionCheckFailure {
				perReplay = 2
			}
			if got := v.cnt.Total(); got != 4*perReplay {
				t.Fatalf("replaying 4 messages cost %d round trips (%v), want %d", got, v.cnt.Ops(), 4*perReplay)
			}
			for i := range ev.Records {
				ev.Records[i].Attributes["ApproximateReceiveCount"] = "2"
			}
			r, _ = h(ctxT(t), ev)
			if failures(r) != "m-4" {
				t.Fatalf("redelivery: %q", failures(r))
			}
			flaky.Store(false)
			r, _ = h(ctxT(t), ev)
			if failures(r) != "" || runs.String() != "map[m-1:1 m-2:1 m-3:1 m-4:3 m-5:1]" {
				t.Fatalf("third delivery: %q runs %v", failures(r), runs.String())
			}
		})
		t.Run("ParallelDuplicateBatches", func(t *testing.T) {
			var runs sqsRuns
			// The duplicates' wait is a hang guard (as newGuard's): no
			// message is refused in flight because the machine is slow.
			h, _ := event.SQS(sqsGuard(t, v.s, clk, 2*time.Minute), event.SQSConfig{Operation: "ship-" + rnd(4), Concurrency: 4},
				func(ctx context.Context, m events.SQSMessage) error {
					runs.add(m.MessageId)
					time.Sleep(30 * time.Millisecond)
					return nil
				})
			ev := batchOf("1", "2", "3", "4", "5", "6", "7", "8")
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					if r, _ := h(ctxT(t), ev); failures(r) != "" {
						t.Errorf("failures %q", failures(r))
					}
				})
			}
			wg.Wait()
			if runs.String() != "map[m-1:1 m-2:1 m-3:1 m-4:1 m-5:1 m-6:1 m-7:1 m-8:1]" {
				t.Fatalf("runs %v", runs.String())
			}
		})
	})
}

// A crash in the middle of a batch, on DynamoDB: after redelivery the
// records before the crash are not run again, the record being processed
// stays claimed (reported failed) until its lease ends and then runs again,
// and where the emulator has transactions its Transact write commits
// exactly once.
func TestSQSCrashMidBatchOnDynamoDB(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(time.Now())
		biz := ""
		if e.Caps.Transactions {
			biz = e.CreateTable(t, "RunsTable")
		}
		op := "ship-" + rnd(4)
		var runs sqsRuns
		consumer := func(st idem.Store, die func()) event.SQSHandler {
			h, err := event.SQS(sqsGuard(t, st, clk, -1), event.SQSConfig{Operation: op}, func(ctx context.Context, m events.SQSMessage) error {
				runs.add(m.MessageId)
				if biz != "" {
					if err := idem.Transact(ctx, businessPut(biz, op+"/"+m.MessageId)); err != nil {
						return err
					}
				}
				if m.MessageId == "m-3" && die != nil {
					die() // after the work, before its completion is written
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		k := &killable{Store: v.s}
		ev := batchOf("1", "2", "3", "4", "5")
		_, _ = consumer(k, func() { k.dead.Store(true) })(ctxT(t), ev) // dies; SQS redelivers the batch
		if runs.String() != "map[m-1:1 m-2:1 m-3:1]" {
			t.Fatalf("before the crash: %v", runs.String())
		}
		if biz != "" && businessExists(t, v.c, biz, op+"/m-3") {
			t.Fatal("the crashed record's write committed without its completion")
		}
		next := consumer(v.s, nil) // a new process
		r, _ := next(ctxT(t), ev)
		if failures(r) != "m-3" {
			t.Fatalf("redelivery: failures %q, want m-3 (still claimed by the dead process)", failures(r))
		}
		clk.Advance(idem.DefaultLease + time.Second)
		r, _ = next(ctxT(t), ev)
		if failures(r) != "" || runs.String() != "map[m-1:1 m-2:1 m-3:2 m-4:1 m-5:1]" {
			t.Fatalf("after the lease: %q runs %v", failures(r), runs.String())
		}
		if biz != "" {
			for _, id := range []string{"1", "2", "3", "4", "5"} {
				if !businessExists(t, v.c, biz, op+"/m-"+id) {
					t.Fatalf("write for m-%s missing", id)
				}
			}
		}
	})
}
