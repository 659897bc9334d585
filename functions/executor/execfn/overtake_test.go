package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// A live run is overtaken: the tests below hold a slow node open by a gate
// (never a sleep), move an injected clock far past the stale window and
// tick the heartbeat by hand.

// logStore is a run store that keeps node logs (both stores are).
type logStore interface {
	runs.RunStore
	runs.LogStore
}

// renewSignal reports each heartbeat renewal once it is written.
type renewSignal struct {
	logStore
	renewed chan error
}

func (s *renewSignal) Renew(ctx context.Context, id string, epoch int64, now time.Time) (runs.Run, error) {
	r, err := s.logStore.Renew(ctx, id, epoch, now)
	s.renewed <- err
	return r, err
}

// gatedTicker is a manual heartbeat ticker: it ticks only when told to.
type gatedTicker struct{ ch chan time.Time }

func (g *gatedTicker) New(time.Duration) (<-chan time.Time, func()) { return g.ch, func() {} }

// tick hands one tick to the heartbeat, which is waiting for it from the
// moment its execution started. The bound only keeps a missing heartbeat
// from hanging the test; it is far beyond any scheduling delay, so no
// verdict of a heartbeat that exists depends on the machine's speed.
func (g *gatedTicker) tick(t *testing.T) bool {
	t.Helper()
	select {
	case g.ch <- time.Time{}:
		return true
	case <-time.After(2 * time.Minute):
		return false
	}
}

// gate holds a hold node open: the executor's Sleep reports that it
// entered and waits for release (or its context).
type gate struct {
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 8), release: make(chan struct{})} }

func (g *gate) sleep(ctx context.Context, _ time.Duration) error {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// overtakeStack is two executors on one run store and one injected clock.
type overtakeStack struct {
	store logStore
	sig   *renewSignal
	clk   *clock
	rc    *receiver
	l     *ledger.Ledger
}

// forEachRunStore runs fn over the memory store and DynamoRuns on every
// emulator.
func forEachRunStore(t *testing.T, fn func(t *testing.T, store logStore)) {
	t.Run("memory", func(t *testing.T) { fn(t, runs.NewMemRuns()) })
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		fn(t, &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")})
	})
}

func newOvertakeStack(t *testing.T, store logStore) *overtakeStack {
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	return &overtakeStack{store: store, sig: &renewSignal{logStore: store, renewed: make(chan error, 64)}, clk: clk, rc: newReceiver(t), l: l}
}

// executor returns an executor of the stack whose hold nodes wait on g and
// whose heartbeat ticks on tk, stale after 5 s (RUN_STALE_SECONDS=5).
func (s *overtakeStack) executor(g *gate, tk *gatedTicker) *Executor {
	return &Executor{Runs: s.sig, StaleAfter: 5 * time.Second, Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: s.clk.Now, SleepFunc: g.sleep, NewTickerFunc: tk.New}},
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Webhook: &webhook.Webhook{Ledger: s.l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, Test: webhook.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: s.clk.Now}}}}
}

// slowRun creates a wait -> effect run whose wait outlasts the stale
// window by a lot (20 s at RUN_STALE_SECONDS=5; the gate decides).
func (s *overtakeStack) slowRun(t *testing.T) runs.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"delayMs": 20000, "url": s.rc.srv.URL + "/hook"})
	r := runs.NewRun("acme", webhook.WorkflowReplaySideEffect, in, s.clk.Now())
	if err := s.store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// wantLog fails unless the run's node log is exactly want (type@node).
func wantLog(t *testing.T, r runs.Run, want ...string) {
	t.Helper()
	var got []string
	for _, e := range r.Log {
		got = append(got, e.Type+"@"+e.NodeID)
	}
	if len(got) != len(want) {
		t.Fatalf("node log %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("node log %v, want %v", got, want)
		}
	}
}

// wantRun fails unless run id is in status, its node log is log
// (type@node) and the receiver has had deliveries deliveries so far.
func (s *overtakeStack) wantRun(t *testing.T, id string, status runs.Status, deliveries int, log ...string) {
	t.Helper()
	got, err := s.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != status {
		t.Fatalf("run %s, want %s", got.Status, status)
	}
	wantLog(t, got, log...)
	if n := len(s.rc.seen()); n != deliveries {
		t.Fatalf("%d deliveries, want %d", n, deliveries)
	}
}

var cleanLog = []string{"node.started@wait", "node.completed@wait", "node.started@effect", "node.completed@effect"}

// TestLiveRunIsNotOvertaken: an executor holding a node open for eight
// stale windows (on the injected clock) renews its claim on every tick of
// its heartbeat, and a stale-run pass after each step takes nothing. The
// run then completes with one event of each kind per node and one
// delivery. On memory and every emulator.
func TestLiveRunIsNotOvertaken(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		s := newOvertakeStack(t, store)
		g1, tk1 := newGate(), &gatedTicker{ch: make(chan time.Time)}
		x1 := s.executor(g1, tk1)
		open := newGate()
		close(open.release)
		x2 := s.executor(open, &gatedTicker{ch: make(chan time.Time)}) // another process's resumer
		r := s.slowRun(t)
		t0 := s.clk.Now()
		done := make(chan error, 1)
		go func() { done <- x1.Execute(ctx, r.ID) }()
		<-g1.entered

		for step := 1; step <= 16; step++ {
			// Half a stale window passes, then the heartbeat ticks.
			s.clk.Set(t0.Add(time.Duration(step) * 2500 * time.Millisecond))
			if !tk1.tick(t) {
				t.Errorf("step %d: the driving executor runs no heartbeat", step)
			} else if err := <-s.sig.renewed; err != nil {
				t.Fatalf("step %d: renewal: %v", step, err)
			}
			if n, err := x2.ResumeStale(ctx); err != nil || n != 0 {
				close(g1.release)
				<-done
				t.Fatalf("step %d (+%s): the stale pass took %d live runs (%v), want none", step, s.clk.Now().Sub(t0), n, err)
			}
		}
		close(g1.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		s.wantRun(t, r.ID, runs.StatusCompleted, 1, cleanLog...)
	})
}

// TestDeadExecutorIsOvertakenAndFenced: an executor whose heartbeat stops
// (a process paused or dead mid-node) loses the run to the stale-run pass
// once its claim has lapsed; when it wakes, its node-log append is refused
// (fenced by the claim), so it writes nothing, sends nothing and stops,
// and the node log holds no duplicate event. The resumer completes the
// run. On memory and every emulator.
func TestDeadExecutorIsOvertakenAndFenced(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		s := newOvertakeStack(t, store)
		g1, g2 := newGate(), newGate()
		x1 := s.executor(g1, &gatedTicker{ch: make(chan time.Time)}) // its heartbeat never ticks: it is dead
		x2 := s.executor(g2, &gatedTicker{ch: make(chan time.Time)})
		r := s.slowRun(t)
		t0 := s.clk.Now()
		done1 := make(chan error, 1)
		go func() { done1 <- x1.Execute(ctx, r.ID) }()
		<-g1.entered

		// Just inside the window the pass takes nothing.
		s.clk.Set(t0.Add(4 * time.Second))
		if n, err := x2.ResumeStale(ctx); err != nil || n != 0 {
			t.Fatalf("inside the window: the pass took %d runs (%v)", n, err)
		}
		// The claim lapses: the pass takes the run, and its execution
		// holds the wait node open too.
		s.clk.Set(t0.Add(6 * time.Second))
		type pass struct {
			n   int
			err error
		}
		done2 := make(chan pass, 1)
		go func() { n, err := x2.ResumeStale(ctx); done2 <- pass{n, err} }()
		<-g2.entered

		// The overtaken executor wakes: its append is refused.
		close(g1.release)
		if err := <-done1; err != nil {
			t.Fatalf("the overtaken executor: %v", err)
		}
		// The pass that took the run over recorded that it was restored
		// (workflow.restored); the overtaken executor added nothing and
		// delivered nothing.
		s.wantRun(t, r.ID, runs.StatusRunning, 0, "node.started@wait", "workflow.restored@")

		close(g2.release)
		if p := <-done2; p.err != nil || p.n != 1 {
			t.Fatalf("the pass took %d runs (%v), want 1", p.n, p.err)
		}
		s.wantRun(t, r.ID, runs.StatusCompleted, 1, append([]string{cleanLog[0], "workflow.restored@"}, cleanLog[1:]...)...)
	})
}

// TestOverlappingExecutionsWriteOneLog: two executions of one running run
// at once (a parked run's resume racing a duplicate delivery) never both
// write its node log: the later one takes the claim, the earlier one's
// appends are refused (it writes nothing, sends nothing and stops), and
// the log has one event of each kind per node. On memory and every
// emulator.
func TestOverlappingExecutionsWriteOneLog(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		ctx := context.Background()
		s := newOvertakeStack(t, store)
		g1, g2 := newGate(), newGate()
		x1 := s.executor(g1, &gatedTicker{ch: make(chan time.Time)})
		x2 := s.executor(g2, &gatedTicker{ch: make(chan time.Time)})
		r := s.slowRun(t)
		done1, done2 := make(chan error, 1), make(chan error, 1)
		go func() { done1 <- x1.Execute(ctx, r.ID) }()
		<-g1.entered
		go func() { done2 <- x2.Execute(ctx, r.ID) }()
		<-g2.entered

		close(g1.release)
		if err := <-done1; err != nil {
			t.Fatalf("the earlier execution: %v", err)
		}
		// The overtaken execution wrote nothing and delivered nothing; the
		// later one holds the run.
		s.wantRun(t, r.ID, runs.StatusRunning, 0, "node.started@wait")

		close(g2.release)
		if err := <-done2; err != nil {
			t.Fatalf("the later execution: %v", err)
		}
		s.wantRun(t, r.ID, runs.StatusCompleted, 1, cleanLog...)
	})
}

// stalledRenew is a store whose heartbeat renewal hangs until its context
// ends (a stalled store), reporting when it started.
type stalledRenew struct {
	logStore
	stalled chan struct{}
}

func (s *stalledRenew) Renew(ctx context.Context, _ string, _ int64, _ time.Time) (runs.Run, error) {
	s.stalled <- struct{}{}
	<-ctx.Done()
	return runs.Run{}, ctx.Err()
}

// TestStalledRenewalDoesNotHoldTheRun: a heartbeat renewal stuck in a
// stalled store does not keep the execution from finishing once its nodes
// are done: the renewal is cancelled and the run completes.
func TestStalledRenewalDoesNotHoldTheRun(t *testing.T) {
	ctx := context.Background()
	s := newOvertakeStack(t, runs.NewMemRuns())
	g, tk := newGate(), &gatedTicker{ch: make(chan time.Time)}
	x := s.executor(g, tk)
	st := &stalledRenew{logStore: s.store, stalled: make(chan struct{}, 1)}
	x.Runs = st
	r := s.slowRun(t)
	done := make(chan error, 1)
	go func() { done <- x.Execute(ctx, r.ID) }()
	<-g.entered
	if !tk.tick(t) {
		t.Fatal("the driving executor runs no heartbeat")
	}
	<-st.stalled
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, _ := s.store.Get(ctx, r.ID); got.Status != runs.StatusCompleted {
		t.Fatalf("run %s, want completed", got.Status)
	}
}

// holdingReceiver answers each webhook request once release is closed; a
// request whose client went away first (the sender cut it) is reported on
// cut.
type holdingReceiver struct {
	srv          *httptest.Server
	arrived, cut chan string
	release      chan struct{}
	mu           sync.Mutex
	keys         []string
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	r := &holdingReceiver{arrived: make(chan string, 8), cut: make(chan string, 8), release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body)
		key := req.Header.Get("Idempotency-Key")
		r.mu.Lock()
		r.keys = append(r.keys, key)
		r.mu.Unlock()
		r.arrived <- key
		select {
		case <-r.release:
			w.WriteHeader(http.StatusOK)
		case <-req.Context().Done():
			r.cut <- key
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *holdingReceiver) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// TestOvertakenExecutionLetsItsDeliveryFinish: an execution overtaken
// while its webhook request is at the receiver (a duplicate delivery of
// the run's record adopts it) stops driving the run, but the request it
// has sent is left to finish: it is not cut, its answer is recorded as
// the effect's outcome, and the execution that took the run over replays
// it. Cut, the attempt would be escaped and the delivery sent again by the
// next execution: two requests at a receiver that does not deduplicate.
// On memory.
func TestOvertakenExecutionLetsItsDeliveryFinish(t *testing.T) {
	ctx := context.Background()
	s := newOvertakeStack(t, runs.NewMemRuns())
	rc := newHoldingReceiver(t)
	tk1 := &gatedTicker{ch: make(chan time.Time)}
	x1 := s.executor(newGate(), tk1)
	x2 := s.executor(newGate(), &gatedTicker{ch: make(chan time.Time)})
	in, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/hook", "payload": map[string]any{"order": 42}})
	r := runs.NewRun("acme", webhook.WorkflowWebhook, in, s.clk.Now())
	if err := s.store.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	done1 := make(chan error, 1)
	go func() { done1 <- x1.Execute(ctx, r.ID) }()
	key := <-rc.arrived

	// A duplicate delivery adopts the run: its effect is in flight
	// elsewhere, so it fires nothing and is retried later.
	if err := x2.Execute(ctx, r.ID); !errors.As(err, new(*ledger.InFlightError)) {
		t.Fatalf("the overtaking execution: %v; want the effect in flight", err)
	}
	// The overtaken execution's heartbeat finds its claim taken.
	if !tk1.tick(t) {
		t.Fatal("the overtaken execution runs no heartbeat")
	}
	if err := <-s.sig.renewed; !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("renewal after the overtake: %v; want refused", err)
	}
	select {
	case <-rc.cut:
		t.Error("the overtaken execution cut its request at the receiver")
	case <-time.After(time.Second):
	}
	close(rc.release)
	if err := <-done1; err != nil {
		t.Fatalf("the overtaken execution: %v", err)
	}
	// The stream retries the duplicate delivery after the backoff.
	s.clk.Set(s.clk.Now().Add(time.Minute))
	if err := x2.Execute(ctx, r.ID); err != nil {
		t.Fatalf("the overtaking execution's retry: %v", err)
	}
	got, err := s.store.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runs.StatusCompleted {
		t.Fatalf("run %s (%s), want completed", got.Status, got.Error)
	}
	if n := len(rc.seen()); n != 1 {
		t.Fatalf("the receiver got %d requests (key %s each time), want 1", n, key)
	}
}

// TestEffectContextEndsWithTheExecution: the context of an effect call
// ends with the execution's own context (at once when that has ended
// already, with its cause) and keeps the values and deadline of the
// execution's, but not the run claim's loss.
func TestEffectContextEndsWithTheExecution(t *testing.T) {
	type key struct{}
	cause := errors.New("executor stopping")
	own, stopOwn := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	dl, cancelDl := context.WithTimeout(own, time.Hour)
	defer cancelDl()
	x := &Executor{Runs: runs.NewMemRuns(), Test: TestConfig{Clock: ledgertest.ClockFuncs{NewTickerFunc: (&gatedTicker{ch: make(chan time.Time)}).New}}}
	hctx, hb := x.startHeartbeat(dl, runs.Run{ID: "acme/0123456789abcdef"})
	ectx, stop := effectContext(hctx)
	defer stop()
	hb.cancel() // the claim lost
	if ectx.Err() != nil || ectx.Value(key{}) != "v" {
		t.Fatalf("effect context %v, value %v: want live, with the execution's values", ectx.Err(), ectx.Value(key{}))
	}
	if d, ok := ectx.Deadline(); !ok || d.After(time.Now().Add(time.Hour)) {
		t.Fatalf("effect context deadline %v %v: want the execution's", d, ok)
	}
	stopOwn(cause)
	<-ectx.Done()
	if !errors.Is(context.Cause(ectx), cause) {
		t.Fatalf("cause %v, want the execution's", context.Cause(ectx))
	}
	hb.stop()
	late, stopLate := effectContext(hctx)
	defer stopLate()
	if late.Err() == nil {
		t.Fatal("an effect context made after the execution ended is live")
	}
}
