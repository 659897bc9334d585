package event_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/event"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
)

type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

type receipt struct {
	OrderID   string `json:"orderId"`
	Execution int32  `json:"execution"`
}

func eventGuard(t *testing.T, e *env) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{Store: e.store, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}},
		Logger: slog.New(slog.NewJSONHandler(e.logs, nil)), Wait: time.Minute}) // a hang guard: duplicates wait for the winner however slow the machine
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func orderKey(o order) (string, error) { return "order/" + o.ID, nil }

// A returned value is cached and replayed; an error is returned, never
// cached, and the next delivery runs the function again; a different payload
// under the same key is refused; an empty key is refused before anything runs.
func TestEventOutcomeCaching(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs atomic.Int32
	fail := true
	charge, err := event.Func(g, event.Config[order]{Operation: "charge", Key: orderKey},
		func(ctx context.Context, o order) (receipt, error) {
			n := runs.Add(1)
			if _, ok := idem.FromContext(ctx); !ok {
				t.Error("no claim in the function's context")
			}
			if fail {
				return receipt{}, errors.New("card declined by a flaky provider")
			}
			return receipt{OrderID: o.ID, Execution: n}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	o := order{ID: "42", Total: 100}
	if _, err := charge(ctx, o); err == nil || !strings.Contains(err.Error(), "declined") {
		t.Fatalf("first delivery: %v", err)
	}
	fail = false
	r1, err := charge(ctx, o) // an error is retryable: runs again
	if err != nil || r1 != (receipt{"42", 2}) {
		t.Fatalf("retry: %+v %v", r1, err)
	}
	r2, err := charge(ctx, o) // a value is cached: replayed
	if err != nil || r2 != r1 || runs.Load() != 2 {
		t.Fatalf("replay: %+v %v runs=%d", r2, err, runs.Load())
	}
	if _, err := charge(ctx, order{ID: "42", Total: 999}); !errors.Is(err, idem.ErrPayloadMismatch) {
		t.Fatalf("other payload, same key: %v", err)
	}
	if _, err := charge(ctx, order{}); err != nil {
		t.Fatalf("key order/ is a key: %v", err)
	}
	noKey, _ := event.Func(g, event.Config[order]{Operation: "charge", Key: func(order) (string, error) { return "", nil }},
		func(context.Context, order) (receipt, error) { t.Fatal("ran without a key"); return receipt{}, nil })
	if _, err := noKey(ctx, o); !errors.Is(err, idem.ErrNoEventKey) {
		t.Fatalf("no key: %v", err)
	}
	if runs.Load() != 3 {
		t.Fatalf("runs = %d, want 3", runs.Load())
	}
	if strings.Contains(e.logs.String(), "order/42") {
		t.Fatal("raw key in the logs")
	}
}

// A panic is an error: returned, never cached, the record left retryable.
func TestEventPanicIsRetryable(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs atomic.Int32
	f, _ := event.Func(g, event.Config[order]{Operation: "ship", Key: orderKey}, func(context.Context, order) (int, error) {
		if runs.Add(1) == 1 {
			panic("boom")
		}
		return 7, nil
	})
	if _, err := f(context.Background(), order{ID: "1"}); !errors.Is(err, idem.ErrEventPanic) {
		t.Fatalf("panic: %v", err)
	}
	if v, err := f(context.Background(), order{ID: "1"}); v != 7 || err != nil {
		t.Fatalf("after panic: %v %v", v, err)
	}
}

// 32 concurrent deliveries of one event: the function runs once and every
// delivery gets its value.
func TestEventParallelDuplicates(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs atomic.Int32
	f, _ := event.Func(g, event.Config[order]{Operation: "charge", Key: orderKey}, func(ctx context.Context, o order) (receipt, error) {
		n := runs.Add(1)
		time.Sleep(30 * time.Millisecond)
		return receipt{OrderID: o.ID, Execution: n}, nil
	})
	var wg sync.WaitGroup
	results := make([]receipt, 32)
	errs := make([]error, 32)
	for i := range 32 {
		wg.Go(func() { results[i], errs[i] = f(context.Background(), order{ID: "7", Total: 1}) })
	}
	wg.Wait()
	for i := range 32 {
		if errs[i] != nil || results[i] != (receipt{"7", 1}) {
			t.Fatalf("delivery %d: %+v %v", i, results[i], errs[i])
		}
	}
	if runs.Load() != 1 {
		t.Fatalf("runs = %d", runs.Load())
	}
}

// A duplicate that cannot wait for the running delivery gets ErrInFlight;
// after the owner's lease runs out (a crash), the next delivery reclaims.
func TestEventInFlightAndExpiredLease(t *testing.T) {
	e := newEnv(t, nil) // Wait: -1
	var runs atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{})
	f, _ := event.Func(e.guard, event.Config[order]{Operation: "charge", Key: orderKey, Tenant: func(order) string { return "t1" }},
		func(ctx context.Context, o order) (int32, error) {
			n := runs.Add(1)
			if n == 1 {
				close(started)
				<-release
			}
			return n, nil
		})
	done := make(chan struct{})
	go func() { defer close(done); _, _ = f(context.Background(), order{ID: "9"}) }()
	<-started
	if _, err := f(context.Background(), order{ID: "9"}); !errors.Is(err, idem.ErrInFlight) {
		t.Fatalf("duplicate in flight: %v", err)
	}
	e.clock.Advance(idem.DefaultLease + time.Second) // the owner looks dead
	if v, err := f(context.Background(), order{ID: "9"}); v != 2 || err != nil {
		t.Fatalf("reclaim after lease: %v %v", v, err)
	}
	close(release)
	<-done // the first owner's completion is fenced; it changes nothing
	if v, err := f(context.Background(), order{ID: "9"}); v != 2 || err != nil {
		t.Fatalf("replay of the reclaimer's value: %v %v", v, err)
	}
}

// The late first owner learns that its lease was lost and its value was not
// recorded.
func TestEventFencedCompletion(t *testing.T) {
	e := newEnv(t, nil)
	var runs atomic.Int32
	var f func(context.Context, order) (int32, error)
	f, _ = event.Func(e.guard, event.Config[order]{Operation: "charge", Key: orderKey},
		func(ctx context.Context, o order) (int32, error) {
			n := runs.Add(1)
			if n == 1 {
				e.clock.Advance(idem.DefaultLease + time.Second)
				if v, err := f(context.Background(), o); v != 2 || err != nil {
					t.Errorf("reclaimer: %v %v", v, err)
				}
			}
			return n, nil
		})
	if _, err := f(context.Background(), order{ID: "1"}); !errors.Is(err, idem.ErrLeaseLost) {
		t.Fatalf("fenced first owner: %v", err)
	}
}

// Writes registered with Transact commit with the completion, once.
func TestEventTransact(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	f, _ := event.Func(g, event.Config[order]{Operation: "book", Key: orderKey}, func(ctx context.Context, o order) (string, error) {
		return "booked", idem.Transact(ctx, memstore.Write{Key: "booking#" + o.ID, Value: []byte("1"), IfAbsent: true})
	})
	for range 3 {
		if v, err := f(context.Background(), order{ID: "5"}); v != "booked" || err != nil {
			t.Fatalf("%v %v", v, err)
		}
	}
	if v, ok := e.store.Item("booking#5"); !ok || string(v) != "1" {
		t.Fatalf("business write: %q %v", v, ok)
	}
	// A write whose own condition fails commits nothing: retryable.
	g2, _ := event.Func(g, event.Config[order]{Operation: "book-again", Key: orderKey}, func(ctx context.Context, o order) (string, error) {
		return "booked", idem.Transact(ctx, memstore.Write{Key: "booking#" + o.ID, Value: []byte("2"), IfAbsent: true})
	})
	if _, err := g2(context.Background(), order{ID: "5"}); !errors.Is(err, idem.ErrNotCommitted) {
		t.Fatalf("conflicting write: %v", err)
	}
}

// Event scopes never meet HTTP scopes, other operations or other tenants.
func TestEventScopes(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs atomic.Int32
	mk := func(op string, tenant func(order) string) func(context.Context, order) (int32, error) {
		f, err := event.Func(g, event.Config[order]{Operation: op, Key: orderKey, Tenant: tenant},
			func(context.Context, order) (int32, error) { return runs.Add(1), nil })
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	ta := func(order) string { return "a" }
	tb := func(order) string { return "b" }
	for _, f := range []func(context.Context, order) (int32, error){mk("x", nil), mk("y", nil), mk("x", ta), mk("x", tb)} {
		if _, err := f(context.Background(), order{ID: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	if runs.Load() != 4 {
		t.Fatalf("runs = %d, want 4 (separate scopes)", runs.Load())
	}
}

func TestEventConfigAndDisabled(t *testing.T) {
	e := newEnv(t, nil)
	_, err := event.Func[order, int](e.guard, event.Config[order]{}, nil)
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("config: %v", err)
	}
	if _, err := event.SQS(e.guard, event.SQSConfig{Concurrency: -1}, func(context.Context, events.SQSMessage) error { return nil }); !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("SQS config: %v", err)
	}
	off := newEnv(t, func(c *idem.Config) { c.Disabled = true })
	runs := 0
	f, _ := event.Func(off.guard, event.Config[order]{Operation: "x", Key: orderKey}, func(context.Context, order) (int, error) { runs++; return runs, nil })
	f(context.Background(), order{ID: "1"})
	f(context.Background(), order{ID: "1"})
	if runs != 2 {
		t.Fatalf("disabled: runs = %d", runs)
	}
}

func sqsBatch(arn string, ids ...string) events.SQSEvent {
	var ev events.SQSEvent
	for _, id := range ids {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m-" + id, Body: `{"id":"` + id + `"}`, EventSourceARN: arn,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	return ev
}

func failedIDs(r events.SQSEventResponse) string {
	var ids []string
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return strings.Join(ids, ",")
}

// A redelivered batch (receive count changed) runs nothing again; only the
// records that failed are reported, and only those run on redelivery.
func TestSQSRedeliveredBatch(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency ", conc), func(t *testing.T) {
			e := newEnv(t, nil)
			g := eventGuard(t, e)
			var mu sync.Mutex
			runs := map[string]int{}
			flaky := map[string]bool{"m-2": true, "m-4": true}
			h, err := event.SQS(g, event.SQSConfig{Operation: "ship", Concurrency: conc}, func(ctx context.Context, m events.SQSMessage) error {
				mu.Lock()
				defer mu.Unlock()
				runs[m.MessageId]++
				if flaky[m.MessageId] {
					return errors.New("downstream unavailable")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			ev := sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2", "3", "4", "5")
			r, err := h(context.Background(), ev)
			if err != nil || failedIDs(r) != "m-2,m-4" {
				t.Fatalf("first delivery: %q %v", failedIDs(r), err)
			}
			mu.Lock()
			delete(flaky, "m-2")
			mu.Unlock()
			for i := range ev.Records {
				ev.Records[i].Attributes["ApproximateReceiveCount"] = "2"
			}
			r, _ = h(context.Background(), ev) // the whole batch again (e.g. a timeout)
			if failedIDs(r) != "m-4" {
				t.Fatalf("redelivery: %q", failedIDs(r))
			}
			want := map[string]int{"m-1": 1, "m-2": 2, "m-3": 1, "m-4": 2, "m-5": 1}
			if fmt.Sprint(runs) != fmt.Sprint(want) {
				t.Fatalf("runs %v, want %v", runs, want)
			}
		})
	}
}

// Two invocations handle the same batch at once (a visibility timeout ran
// out): every message is processed once, and neither reports a failure.
func TestSQSParallelDuplicateBatches(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var runs sync.Map
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship", Concurrency: 3}, func(ctx context.Context, m events.SQSMessage) error {
		n, _ := runs.LoadOrStore(m.MessageId, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	ev := sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2", "3", "4", "5", "6")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if r, _ := h(context.Background(), ev); len(r.BatchItemFailures) != 0 {
				t.Errorf("failures: %q", failedIDs(r))
			}
		})
	}
	wg.Wait()
	runs.Range(func(k, v any) bool {
		if v.(*atomic.Int32).Load() != 1 {
			t.Errorf("%v ran %d times", k, v.(*atomic.Int32).Load())
		}
		return true
	})
}

// FIFO: processing stops at the first failure; it and every later record
// are reported, so the group's order holds.
func TestSQSFIFOStopsAtFirstFailure(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var seen []string
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship", Concurrency: 8}, func(ctx context.Context, m events.SQSMessage) error {
		seen = append(seen, m.MessageId)
		if m.MessageId == "m-2" {
			return errors.New("not yet")
		}
		return nil
	})
	r, _ := h(context.Background(), sqsBatch("arn:aws:sqs:us-east-1:1:orders.fifo", "1", "2", "3", "4"))
	if failedIDs(r) != "m-2,m-3,m-4" || strings.Join(seen, ",") != "m-1,m-2" {
		t.Fatalf("failures %q, seen %v", failedIDs(r), seen)
	}
}

// FIFO with SkipGroupOnError: only the failed message's group stops; the
// other groups go on.
func TestSQSFIFOSkipGroupOnError(t *testing.T) {
	e := newEnv(t, nil)
	g := eventGuard(t, e)
	var seen []string
	h, _ := event.SQS(g, event.SQSConfig{Operation: "ship", SkipGroupOnError: true}, func(ctx context.Context, m events.SQSMessage) error {
		seen = append(seen, m.MessageId)
		if m.MessageId == "m-2" {
			return errors.New("not yet")
		}
		return nil
	})
	ev := sqsBatch("arn:aws:sqs:us-east-1:1:orders.fifo", "1", "2", "3", "4", "5")
	for i, grp := range []string{"a", "a", "b", "a", "b"} {
		ev.Records[i].Attributes["MessageGroupId"] = grp
	}
	r, _ := h(context.Background(), ev)
	if failedIDs(r) != "m-2,m-4" || strings.Join(seen, ",") != "m-1,m-2,m-3,m-5" {
		t.Fatalf("failures %q, seen %v", failedIDs(r), seen)
	}
}

// crashStore stands for a process that dies: once dead, nothing it sends
// reaches the store.
type crashStore struct {
	idem.Store
	dead atomic.Bool
}

var errDead = errors.New("process crashed")

func (s *crashStore) Claim(ctx context.Context, r idem.Record, now time.Time) (idem.ClaimResult, error) {
	if s.dead.Load() {
		return idem.ClaimResult{}, errDead
	}
	return s.Store.Claim(ctx, r, now)
}
func (s *crashStore) Complete(ctx context.Context, claim idem.Record, o idem.Outcome, now time.Time) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Complete(ctx, claim, o, now)
}
func (s *crashStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Release(ctx, claim, now)
}
func (s *crashStore) Delete(ctx context.Context, id, owner string, now time.Time) error {
	if s.dead.Load() {
		return errDead
	}
	return s.Store.Delete(ctx, id, owner, now)
}

// A crash in the middle of a batch: the records before it are not run again
// on redelivery, the one it was running stays claimed until its lease ends
// (then runs again: its Transact writes commit exactly once), and the ones
// after it run once.
func TestSQSCrashMidBatch(t *testing.T) {
	e := newEnv(t, nil)
	crash := &crashStore{Store: e.store}
	runs := map[string]int{}
	mk := func(st idem.Store) event.SQSHandler {
		g, err := idem.New(idem.Config{Store: st, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}}, Wait: -1,
			Logger: slog.New(slog.NewJSONHandler(e.logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		h, err := event.SQS(g, event.SQSConfig{Operation: "ship"}, func(ctx context.Context, m events.SQSMessage) error {
			runs[m.MessageId]++
			if err := idem.Transact(ctx, memstore.Write{Key: "shipment#" + m.MessageId, Value: []byte(m.Body), IfAbsent: true}); err != nil {
				return err
			}
			if m.MessageId == "m-3" && !crash.dead.Load() && st == idem.Store(crash) {
				crash.dead.Store(true) // dies after the work, before recording it
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ev := sqsBatch("arn:aws:sqs:us-east-1:1:orders", "1", "2", "3", "4", "5")
	_, _ = mk(crash)(context.Background(), ev) // the invocation dies; SQS redelivers the whole batch
	if fmt.Sprint(runs) != "map[m-1:1 m-2:1 m-3:1]" {
		t.Fatalf("before the crash: %v", runs)
	}
	if _, ok := e.store.Item("shipment#m-3"); ok {
		t.Fatal("the crashed record's write committed without its completion")
	}
	next := mk(e.store) // a new process
	r, _ := next(context.Background(), ev)
	if failedIDs(r) != "m-3" {
		t.Fatalf("redelivery: failures %q (m-3 is still claimed by the dead process)", failedIDs(r))
	}
	e.clock.Advance(idem.DefaultLease + time.Second)
	r, _ = next(context.Background(), sqsBatch("arn:aws:sqs:us-east-1:1:orders", "3"))
	if len(r.BatchItemFailures) != 0 {
		t.Fatalf("after the lease: %q", failedIDs(r))
	}
	r, _ = next(context.Background(), ev)
	if len(r.BatchItemFailures) != 0 || fmt.Sprint(runs) != "map[m-1:1 m-2:1 m-3:2 m-4:1 m-5:1]" {
		t.Fatalf("final: %q %v", failedIDs(r), runs)
	}
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		if v, ok := e.store.Item("shipment#m-" + id); !ok || string(v) != `{"id":"`+id+`"}` {
			t.Fatalf("shipment m-%s: %q %v", id, v, ok)
		}
	}
}

// A producer that re-sends a message with the key taken from its body
// but a new timestamp: with the whole body as the payload, the new
// message (its own MessageId) fails as a mismatch on every delivery, so
// the queue's redrive policy moves it to the dead-letter queue. Its
// failure is logged once, with its message id, saying so, however often
// it is redelivered. With the payload leaving the delivery metadata out
// (SQSConfig.Payload), the re-send is the duplicate it is: acknowledged,
// not run again.
func TestSQSPayloadMismatchLoggedOnceAndGoesToTheDLQ(t *testing.T) {
	keyOf := func(m events.SQSMessage) (string, error) {
		var b struct{ Order string }
		err := json.Unmarshal([]byte(m.Body), &b)
		return "order-" + b.Order, err
	}
	msg := func(id, body, receives string) events.SQSEvent {
		return events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: body, EventSourceARN: "arn:aws:sqs:us-east-1:1:orders",
			Attributes: map[string]string{"ApproximateReceiveCount": receives}}}}
	}
	for _, withPayload := range []bool{false, true} {
		t.Run(fmt.Sprintf("Payload=%v", withPayload), func(t *testing.T) {
			e := newEnv(t, nil)
			g := eventGuard(t, e)
			cfg := event.SQSConfig{Operation: "ship", Key: keyOf}
			if withPayload {
				cfg.Payload = func(m events.SQSMessage) ([]byte, error) {
					var b struct {
						Order string `json:"order"`
						Qty   int    `json:"qty"`
					}
					err := json.Unmarshal([]byte(m.Body), &b)
					return []byte(b.Order + "/" + strconv.Itoa(b.Qty)), err // sentAt left out
				}
			}
			runs := 0
			h, err := event.SQS(g, cfg, func(context.Context, events.SQSMessage) error { runs++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if r, _ := h(context.Background(), msg("m-1", `{"order":"42","qty":1,"sentAt":"10:00:00"}`, "1")); len(r.BatchItemFailures) != 0 || runs != 1 {
				t.Fatalf("first message: %q runs %d", failedIDs(r), runs)
			}
			for receive := 1; receive <= 3; receive++ {
				r, _ := h(context.Background(), msg("m-resent", `{"order":"42","qty":1,"sentAt":"10:05:00"}`, strconv.Itoa(receive)))
				if withPayload && (len(r.BatchItemFailures) != 0 || runs != 1) {
					t.Fatalf("re-send, delivery %d: %q runs %d; want a duplicate, acknowledged", receive, failedIDs(r), runs)
				}
				if !withPayload && (failedIDs(r) != "m-resent" || runs != 1) {
					t.Fatalf("re-send, delivery %d: %q runs %d; want a failure, nothing run", receive, failedIDs(r), runs)
				}
			}
			lines := 0
			for _, l := range strings.Split(e.logs.String(), "\n") {
				if strings.Contains(l, `"outcome":"mismatch"`) && strings.Contains(l, "SQS") {
					lines++
					for _, want := range []string{`"message_id":"m-resent"`, "dead-letter queue", "maxReceiveCount", "SQSConfig.Payload"} {
						if !strings.Contains(l, want) {
							t.Errorf("the mismatch line does not say %s: %s", want, l)
						}
					}
				}
			}
			if want := map[bool]int{false: 1, true: 0}[withPayload]; lines != want {
				t.Fatalf("%d mismatch lines, want %d:\n%s", lines, want, e.logs.String())
			}
		})
	}
}
