package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// The run's caps (configurable.run): the clock is injected and moved by
// hand (a wait node's sleep moves it by the time asked), the heartbeat
// never ticks, so no verdict depends on the machine's speed.

// capStack is an executor over one run store with a hand-moved clock.
type capStack struct {
	store logStore
	clk   *clock
	x     *Executor
}

func newCapStack(t *testing.T, store logStore) *capStack {
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	cf := ledgertest.ClockFuncs{NowFunc: clk.Now}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Wait: -1, Test: ledger.TestConfig{Clock: cf}})
	if err != nil {
		t.Fatal(err)
	}
	never := make(chan time.Time)
	x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now,
			SleepFunc: func(ctx context.Context, d time.Duration) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				clk.Set(clk.Now().Add(d))
				return nil
			},
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return never, func() {} }}},
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Second, MaxTries: 5,
			Test: webhook.TestConfig{Clock: cf}}}
	return &capStack{store: store, clk: clk, x: x}
}

// newRun creates a run of workflowID with inputs and configurable at the
// stack's now.
func (s *capStack) newRun(t *testing.T, workflowID, inputs, configurable string) runs.Run {
	t.Helper()
	r := runs.NewRun("acme", workflowID, json.RawMessage(inputs), s.clk.Now())
	r.Options.Configurable = json.RawMessage(configurable)
	if err := s.store.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *capStack) get(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := s.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// capEvents returns the payloads of a run's cap.breached events, each
// checked against the closed capBreached payload schema.
func capEvents(t *testing.T, r runs.Run) []map[string]any {
	t.Helper()
	sch, err := wireschema.Load(t).Schema("run-event-payloads.schema.json#/$defs/capBreached")
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range r.Log {
		if ev.Type != runs.EventCapBreached {
			continue
		}
		if err := wireschema.Validate(sch, ev.Payload); err != nil {
			t.Fatalf("cap.breached payload %s against capBreached: %v", ev.Payload, err)
		}
		var p map[string]any
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// terminalVersions counts the versions of a run that set a terminal status.
func terminalVersions(r runs.Run) int {
	n := 0
	for _, v := range r.History {
		var s runs.Status
		if json.Unmarshal(v[runs.FieldStatus], &s) == nil && s.Terminal() {
			n++
		}
	}
	return n
}

func nodeEvents(r runs.Run) []string {
	var out []string
	for _, ev := range r.Log {
		if ev.NodeID != "" {
			out = append(out, ev.Type+"@"+ev.NodeID)
		}
	}
	return out
}

const timeout1s = `{"version":1,"run":{"runTimeoutMs":1000}}`

// TestRunTimeoutEndsTheRunOnce: a run whose runTimeoutMs has passed
// before any executor reached it, delivered to executors racing (the
// stream's INSERT delivered again, resumes of the run), ends failed with
// run_timeout once: one cap.breached {kind: run-duration, limit, observed}
// and one terminal version, no node executed. On the memory store and
// DynamoRuns on every emulator.
func TestRunTimeoutEndsTheRunOnce(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		var metrics testutil.SyncBuffer
		s.x.Metrics = emf.New(&metrics, "idemkit")
		run := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
		s.clk.Set(run.CreatedAt.Add(1500 * time.Millisecond))
		image := run
		var wg sync.WaitGroup
		errs := make([]error, 8)
		start := make(chan struct{})
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if i%2 == 0 {
					if retry := s.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", image)}); retry != nil {
						errs[i] = errRetry(retry)
					}
					return
				}
				errs[i] = s.x.Execute(context.Background(), run.ID)
			}()
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("racing execution: %v", err)
			}
		}
		got := s.get(t, run.ID)
		caps := capEvents(t, got)
		if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(caps) != 1 || terminalVersions(got) != 1 {
			t.Fatalf("run %s (%s), %d cap.breached, %d terminal versions; want failed run_timeout once", got.Status, got.ErrorCode, len(caps), terminalVersions(got))
		}
		if c := caps[0]; c["kind"] != KindRunDuration || c["limit"] != float64(1000) || c["observed"].(float64) < 1000 || c["nodeId"] != nil {
			t.Fatalf("cap.breached payload %v", c)
		}
		if evs := nodeEvents(got); len(evs) != 0 {
			t.Fatalf("node events %v of a run past its deadline before any node", evs)
		}
		// Counted once, by the execution whose write ended the run.
		if n := capsBreached(t, metrics.String(), KindRunDuration); n != 1 {
			t.Fatalf("%s{kind=%s} counted %d times, want 1:\n%s", MetricCapsBreached, KindRunDuration, n, metrics.String())
		}
	})
}

// capsBreached sums MetricCapsBreached of kind over EMF lines.
func capsBreached(t *testing.T, lines, kind string) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		if v, ok := rec[MetricCapsBreached].(float64); ok && rec[DimKind] == kind {
			n += int(v)
		}
	}
	return n
}

type errRetry []string

func (e errRetry) Error() string { return "the record is retried" }

// TestCompletedRunIsNeverTimedOutAfter: a run that completed within its
// runTimeoutMs stays completed when executions reach it after its
// deadline (a duplicate INSERT, a resume): no cap.breached, no new
// version.
func TestCompletedRunIsNeverTimedOutAfter(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		run := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
		if err := s.x.Execute(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		done := s.get(t, run.ID)
		if done.Status != runs.StatusCompleted {
			t.Fatalf("run %s within its timeout", done.Status)
		}
		s.clk.Set(run.CreatedAt.Add(time.Hour))
		if retry := s.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
		if err := s.x.Execute(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.x.ResumeStale(context.Background()); err != nil {
			t.Fatal(err)
		}
		after := s.get(t, run.ID)
		if after.Status != runs.StatusCompleted || after.Version != done.Version || len(capEvents(t, after)) != 0 || after.ErrorCode != "" {
			t.Fatalf("a completed run after its deadline: %s %q, version %d -> %d, %d cap.breached", after.Status, after.ErrorCode, done.Version, after.Version, len(capEvents(t, after)))
		}
	})
}

// TestWaitNodeEndsAtTheDeadline: a run whose hold node would wait 30 s,
// with runTimeoutMs 1000, is ended at its deadline while the node holds:
// node.started, then cap.breached naming the node, failed run_timeout;
// the clock moved to the deadline, not through the whole wait.
func TestWaitNodeEndsAtTheDeadline(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		run := s.newRun(t, webhook.WorkflowCancellable, `{"delayMs":30000}`, timeout1s)
		if err := s.x.Execute(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		got := s.get(t, run.ID)
		caps := capEvents(t, got)
		if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(caps) != 1 {
			t.Fatalf("run %s (%s), %d cap.breached; want failed run_timeout", got.Status, got.ErrorCode, len(caps))
		}
		if c := caps[0]; c["kind"] != KindRunDuration || c["nodeId"] != "hold" || c["limit"] != float64(1000) || c["observed"] != float64(1000) {
			t.Fatalf("cap.breached payload %v", c)
		}
		if evs := nodeEvents(got); len(evs) != 1 || evs[0] != runs.EventNodeStarted+"@hold" {
			t.Fatalf("node events %v, want the hold's start only", evs)
		}
		if !s.clk.Now().Equal(run.Deadline()) {
			t.Fatalf("clock at %v, want the deadline %v", s.clk.Now(), run.Deadline())
		}
	})
}

// TestParkedRunWakesAtItsDeadline: a run parked until its effect's next
// attempt (a 503 with Retry-After: 60) is parked until its deadline
// instead, when that comes first; the pass over due runs then ends it
// failed with run_timeout, and the destination saw one attempt.
func TestParkedRunWakesAtItsDeadline(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer srv.Close()
		in, _ := json.Marshal(map[string]any{"url": srv.URL + "/hook", "payload": map[string]any{"order": 42}})
		run := s.newRun(t, webhook.WorkflowWebhook, string(in), `{"version":1,"run":{"runTimeoutMs":2000}}`)
		var parkedAt []time.Time
		s.x.Parked = func(at time.Time) { parkedAt = append(parkedAt, at) }
		if err := s.x.Execute(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		parked := s.get(t, run.ID)
		if !parked.Wake.At.Equal(run.Deadline()) || len(parkedAt) != 1 || !parkedAt[0].Equal(run.Deadline()) {
			t.Fatalf("parked until %v (reported %v), want the deadline %v", parked.Wake.At, parkedAt, run.Deadline())
		}
		s.clk.Set(run.Deadline().Add(-time.Millisecond))
		if n, err := s.x.ResumeDue(context.Background()); err != nil || n != 0 {
			t.Fatalf("before the deadline: resumed %d (%v)", n, err)
		}
		s.clk.Set(run.Deadline())
		if n, err := s.x.ResumeDue(context.Background()); err != nil || n != 1 {
			t.Fatalf("at the deadline: resumed %d (%v), want 1", n, err)
		}
		got := s.get(t, run.ID)
		if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 || !got.Wake.IsZero() {
			t.Fatalf("run %s (%s), %d cap.breached, wake %v; want failed run_timeout, unparked", got.Status, got.ErrorCode, len(capEvents(t, got)), got.Wake)
		}
		if n := hits.Load(); n != 1 {
			t.Fatalf("the destination saw %d attempts, want 1", n)
		}
	})
}

// TestLoopIterationsBreach: the loop workflow (start -> effect -> wait ->
// effect) enters its loop at effect twice; with maxLoopIterations 1 the
// second entry is refused before it executes: cap.breached {kind:
// loop-iterations, limit 1, observed 2, nodeId effect}, failed
// loop_limit_exceeded, one delivery; with maxLoopIterations 2 it
// completes with two.
func TestLoopIterationsBreach(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		for _, c := range []struct {
			max        int
			status     runs.Status
			deliveries int
		}{{1, runs.StatusFailed, 1}, {2, runs.StatusCompleted, 2}} {
			s := newCapStack(t, store)
			var metrics testutil.SyncBuffer
			s.x.Metrics = emf.New(&metrics, "idemkit")
			rc := newReceiver(t)
			in, _ := json.Marshal(map[string]any{"url": rc.srv.URL + "/hook", "delayMs": 0})
			conf, _ := json.Marshal(map[string]any{"version": 1, "run": map[string]any{"maxLoopIterations": c.max}})
			run := s.newRun(t, webhook.WorkflowReplayOrdinalLoop, string(in), string(conf))
			if err := s.x.Execute(context.Background(), run.ID); err != nil {
				t.Fatal(err)
			}
			got := s.get(t, run.ID)
			if got.Status != c.status || len(rc.seen()) != c.deliveries {
				t.Fatalf("maxLoopIterations %d: run %s (%s), %d deliveries; want %s, %d", c.max, got.Status, got.ErrorCode, len(rc.seen()), c.status, c.deliveries)
			}
			caps := capEvents(t, got)
			if n, want := capsBreached(t, metrics.String(), KindLoopIterations), len(caps); n != want {
				t.Fatalf("%s{kind=%s} counted %d times, want %d", MetricCapsBreached, KindLoopIterations, n, want)
			}
			if c.status == runs.StatusCompleted {
				if len(caps) != 0 {
					t.Fatalf("cap.breached %v of a run within its loop iterations", caps)
				}
				continue
			}
			if got.ErrorCode != CodeLoopLimitExceeded || len(caps) != 1 {
				t.Fatalf("run %s, %d cap.breached; want loop_limit_exceeded once", got.ErrorCode, len(caps))
			}
			if want := "the run would start iteration 2 of its loop (node effect); its maxLoopIterations is 1"; got.Error != want {
				t.Fatalf("the run's error message %q, want %q", got.Error, want)
			}
			if p := caps[0]; p["kind"] != KindLoopIterations || p["limit"] != float64(1) || p["observed"] != float64(2) || p["nodeId"] != "effect" {
				t.Fatalf("cap.breached payload %v", p)
			}
			want := []string{"node.started@start", "node.completed@start", "node.started@effect", "node.completed@effect", "node.started@wait", "node.completed@wait"}
			if evs := nodeEvents(got); len(evs) != len(want) {
				t.Fatalf("node events %v, want %v", evs, want)
			}
		}
	})
}

// TestRetriedNodeSeesTheSameConfigurable: every attempt of a node carries
// the run's configurable, the bytes persisted at create: the
// side-effecting node's first attempt is answered 503 (Retry-After: 1),
// the run is parked, and the pass over due runs executes the node again
// in a new execution that reads the run from the store; both deliveries
// carry the same configurable bytes, those of the run as created
// (characters JSON encoders like to escape included).
func TestRetriedNodeSeesTheSameConfigurable(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		var mu sync.Mutex
		var bodies [][]byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			b, _ := io.ReadAll(req.Body)
			mu.Lock()
			bodies = append(bodies, b)
			first := len(bodies) == 1
			mu.Unlock()
			if first {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		defer srv.Close()
		const conf = `{"version":1,"run":{"escalationThreshold":0.50},"ai":{"temperature":1e0,"promptOverrides":{"p":"<a & b> é \u2028"}},"extensions":{"acme":{"z":1,"a":[true,null]}}}`
		in, _ := json.Marshal(map[string]any{"url": srv.URL + "/hook", "delayMs": 0})
		run := s.newRun(t, webhook.WorkflowReplaySideEffect, string(in), conf)
		if err := s.x.Execute(context.Background(), run.ID); err != nil {
			t.Fatal(err)
		}
		parked := s.get(t, run.ID)
		if parked.Wake.IsZero() {
			t.Fatalf("run %s not parked after a 503", parked.Status)
		}
		s.clk.Set(parked.Wake.At)
		if n, err := s.x.ResumeDue(context.Background()); err != nil || n != 1 {
			t.Fatalf("resumed %d (%v)", n, err)
		}
		if got := s.get(t, run.ID); got.Status != runs.StatusCompleted {
			t.Fatalf("run %s after the retried node", got.Status)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != 2 {
			t.Fatalf("%d attempts, want 2", len(bodies))
		}
		for i, b := range bodies {
			var p struct {
				Configurable json.RawMessage `json:"configurable"`
				NodeID       string          `json:"nodeId"`
			}
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatalf("attempt %d body %s: %v", i+1, b, err)
			}
			if string(p.Configurable) != conf || p.NodeID != "effect" {
				t.Fatalf("attempt %d carried configurable %s (node %s), want the persisted bytes %s", i+1, p.Configurable, p.NodeID, conf)
			}
		}
	})
}

// TestLostDeliveryPastItsDeadlineIsTimedOut: runs whose stream delivery
// was lost (one pending, one left running by a crashed executor) and
// whose runTimeoutMs has passed are ended by the stale-run pass that
// finds them: failed run_timeout, one cap.breached each, no node run.
func TestLostDeliveryPastItsDeadlineIsTimedOut(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		s.x.StaleAfter = time.Minute
		pending := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
		crashed := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
		if _, err := store.Transition(context.Background(), crashed.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", s.clk.Now()); err != nil {
			t.Fatal(err)
		}
		s.clk.Set(pending.CreatedAt.Add(2 * time.Minute))
		if n, err := s.x.ResumeStale(context.Background()); err != nil || n != 2 {
			t.Fatalf("stale pass: %d (%v), want 2", n, err)
		}
		for _, id := range []string{pending.ID, crashed.ID} {
			got := s.get(t, id)
			if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 || len(nodeEvents(got)) != 0 {
				t.Fatalf("run %s (%s), %d cap.breached, node events %v; want failed run_timeout, none run", got.Status, got.ErrorCode, len(capEvents(t, got)), nodeEvents(got))
			}
		}
	})
}

// TestRunTimeoutUnderInjectedFaults: the end on a timeout survives the
// runs table's faults, on every emulator. Its write applied and its answer
// lost (the SDK's retry then fails its condition): the executor takes the
// conflict for the end it wrote, the run is failed run_timeout with one
// cap.breached and one terminal version. Its write throttled past the
// SDK's retries: the execution fails, nothing is written, and the next
// delivery ends the run, once.
func TestRunTimeoutUnderInjectedFaults(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults := dynamotest.NewFaults()
		store := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		ctx := context.Background()
		for _, c := range []struct {
			name   string
			arm    func()
			failed bool // the first execution reports an error
		}{
			{"answer lost", func() { faults.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost()) }, false},
			{"throttled", func() { faults.FailNext("UpdateItem", 20, dynamotest.Throttle()) }, true},
		} {
			s := newCapStack(t, store)
			run := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
			if _, err := store.Transition(ctx, run.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", s.clk.Now()); err != nil {
				t.Fatal(err)
			}
			s.clk.Set(run.CreatedAt.Add(2 * time.Second))
			faults.PassNext("UpdateItem", 1) // the execution's Adopt
			c.arm()
			before := faults.Fired()
			err := s.x.Execute(ctx, run.ID)
			fired := faults.Fired() - before
			faults.Clear()
			if fired == 0 {
				t.Fatalf("%s: no fault reached the end's write", c.name)
			}
			if (err != nil) != c.failed {
				t.Fatalf("%s: the first execution returned %v", c.name, err)
			}
			if c.failed {
				if mid := s.get(t, run.ID); mid.Status != runs.StatusRunning || len(capEvents(t, mid)) != 0 {
					t.Fatalf("%s: after the refused write the run is %s with %d cap.breached", c.name, mid.Status, len(capEvents(t, mid)))
				}
				if err := s.x.Execute(ctx, run.ID); err != nil {
					t.Fatalf("%s: the next delivery: %v", c.name, err)
				}
			}
			if err := s.x.Execute(ctx, run.ID); err != nil { // one more duplicate
				t.Fatal(err)
			}
			got := s.get(t, run.ID)
			if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 || terminalVersions(got) != 1 {
				t.Fatalf("%s: run %s (%s), %d cap.breached, %d terminal versions; want failed run_timeout once", c.name, got.Status, got.ErrorCode, len(capEvents(t, got)), terminalVersions(got))
			}
		}
	})
}

// refusedBreach refuses the next `left` Breach writes with a transient
// error (as a runs table throttled past the SDK's retries answers) and
// passes the rest to the store.
type refusedBreach struct {
	logStore
	left atomic.Int32
}

func (s *refusedBreach) Breach(ctx context.Context, id string, ev runs.LogEvent, code, msg string, now time.Time) (runs.Run, error) {
	if s.left.Add(-1) >= 0 {
		return runs.Run{}, errors.New("host: end run on a breached cap: ProvisionedThroughputExceededException")
	}
	return s.logStore.Breach(ctx, id, ev, code, msg, now)
}

// TestLastTryEndsABreachAsTheBreach: a run past its runTimeoutMs whose
// end on the breach is refused on the execution that is its last try
// (the stream's MaxAttempts-th, or the stale-run pass's) is still ended as
// the breach: failed run_timeout with one cap.breached and one terminal
// version, never failed under the host's own code without the event.
func TestLastTryEndsABreachAsTheBreach(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		for _, trigger := range []string{TriggerStream, TriggerStale} {
			refused := &refusedBreach{logStore: store}
			s := newCapStack(t, refused)
			s.x.MaxAttempts, s.x.StaleAfter = 1, time.Minute
			run := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
			s.clk.Set(run.CreatedAt.Add(2 * time.Minute))
			refused.left.Store(1)
			switch trigger {
			case TriggerStream:
				if retry := s.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
					t.Fatalf("%s: retry %v", trigger, retry)
				}
			default:
				if n, err := s.x.ResumeStale(context.Background()); n != 1 || err != nil {
					t.Fatalf("%s: stale pass claimed %d (%v), want 1", trigger, n, err)
				}
			}
			if refused.left.Load() > 0 {
				t.Fatalf("%s: no breach was refused", trigger)
			}
			got := s.get(t, run.ID)
			if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 || terminalVersions(got) != 1 {
				t.Fatalf("%s: run %s (code %q, error %q), %d cap.breached, %d terminal versions; want failed run_timeout once",
					trigger, got.Status, got.ErrorCode, got.Error, len(capEvents(t, got)), terminalVersions(got))
			}
		}
	})
}

// lateAppend fails the first node-log append transiently after moving the
// clock past the run's deadline: the run's deadline passes while its
// execution is under way, which then fails as a throttled write does.
type lateAppend struct {
	logStore
	clk      *clock
	deadline time.Time
	once     sync.Once
}

func (s *lateAppend) AppendLog(ctx context.Context, id string, f runs.Fence, evs []runs.LogEvent, now time.Time) (runs.Run, error) {
	failed := false
	s.once.Do(func() {
		s.clk.Set(s.deadline.Add(time.Millisecond))
		failed = true
	})
	if failed {
		return runs.Run{}, errors.New("host: append run log: ProvisionedThroughputExceededException")
	}
	return s.logStore.AppendLog(ctx, id, f, evs, now)
}

// TestDeadlinePassedDuringAnExecutionEndsTheRun: when a run's deadline
// passes while an execution of it is under way, the execution's end ends
// the run timed out, whatever stopped the execution: a transient failure
// (here on the stream's last try, which would otherwise fail the run
// under the host's own code) or an effect to be tried again later (which
// would otherwise park the run, running past its deadline until the next
// pass over due runs). Failed run_timeout, one cap.breached, unparked.
func TestDeadlinePassedDuringAnExecutionEndsTheRun(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		t.Run("transient failure on the last try", func(t *testing.T) {
			late := &lateAppend{logStore: store}
			s := newCapStack(t, late)
			late.clk = s.clk
			s.x.MaxAttempts = 1
			run := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
			late.deadline = run.Deadline()
			if retry := s.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
				t.Fatalf("retry %v", retry)
			}
			got := s.get(t, run.ID)
			if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 {
				t.Fatalf("run %s (code %q, error %q), %d cap.breached; want failed run_timeout once", got.Status, got.ErrorCode, got.Error, len(capEvents(t, got)))
			}
		})
		t.Run("effect to be tried later", func(t *testing.T) {
			s := newCapStack(t, store)
			var deadline time.Time
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				hits.Add(1)
				s.clk.Set(deadline.Add(time.Millisecond))
				w.Header().Set("Retry-After", "60")
				w.WriteHeader(http.StatusServiceUnavailable)
			}))
			defer srv.Close()
			in, _ := json.Marshal(map[string]any{"url": srv.URL + "/hook", "payload": map[string]any{"order": 42}})
			run := s.newRun(t, webhook.WorkflowWebhook, string(in), timeout1s)
			deadline = run.Deadline()
			if err := s.x.Execute(context.Background(), run.ID); err != nil {
				t.Fatal(err)
			}
			got := s.get(t, run.ID)
			if got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 || !got.Wake.IsZero() {
				t.Fatalf("run %s (code %q), %d cap.breached, wake %v; want failed run_timeout, unparked", got.Status, got.ErrorCode, len(capEvents(t, got)), got.Wake)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("the destination saw %d attempts, want 1", n)
			}
		})
	})
}

// TestForkOfATimedOutRunHasItsOwnDeadline: a replay fork of a run that
// timed out keeps the source's configurable (runs.NewFork) and counts its
// runTimeoutMs from its own creation: created an hour after the source's
// deadline, it completes within its own; created past its own deadline,
// it is timed out as any run is.
func TestForkOfATimedOutRunHasItsOwnDeadline(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		s := newCapStack(t, store)
		src := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
		s.clk.Set(src.Deadline())
		if err := s.x.Execute(context.Background(), src.ID); err != nil {
			t.Fatal(err)
		}
		timedOut := s.get(t, src.ID)
		if timedOut.ErrorCode != CodeRunTimeout {
			t.Fatalf("source %s (%q), want failed run_timeout", timedOut.Status, timedOut.ErrorCode)
		}
		s.clk.Set(src.CreatedAt.Add(time.Hour))
		fork := runs.NewFork(timedOut, runs.ForkReplay, 0, nil, s.clk.Now())
		if err := store.Create(context.Background(), fork); err != nil {
			t.Fatal(err)
		}
		if string(fork.Options.Configurable) != timeout1s || !fork.Deadline().Equal(fork.CreatedAt.Truncate(time.Millisecond).Add(time.Second)) {
			t.Fatalf("fork configurable %s, deadline %v", fork.Options.Configurable, fork.Deadline())
		}
		if err := s.x.Execute(context.Background(), fork.ID); err != nil {
			t.Fatal(err)
		}
		if got := s.get(t, fork.ID); got.Status != runs.StatusCompleted || len(capEvents(t, got)) != 0 {
			t.Fatalf("fork within its own deadline: %s (%q), %d cap.breached; want completed", got.Status, got.ErrorCode, len(capEvents(t, got)))
		}
		late := runs.NewFork(timedOut, runs.ForkReplay, 0, nil, s.clk.Now())
		if err := store.Create(context.Background(), late); err != nil {
			t.Fatal(err)
		}
		s.clk.Set(late.Deadline())
		if err := s.x.Execute(context.Background(), late.ID); err != nil {
			t.Fatal(err)
		}
		if got := s.get(t, late.ID); got.Status != runs.StatusFailed || got.ErrorCode != CodeRunTimeout || len(capEvents(t, got)) != 1 {
			t.Fatalf("fork past its own deadline: %s (%q), %d cap.breached; want failed run_timeout once", got.Status, got.ErrorCode, len(capEvents(t, got)))
		}
	})
}

// TestBreachNeverWrittenStillEndsTheRun: a run whose end on the breach
// the store refuses every time (a fault that outlasts every retry) is
// still ended on its last try, failed under the host's own code with the
// refusal in its message: a stranded run always reaches a terminal status.
func TestBreachNeverWrittenStillEndsTheRun(t *testing.T) {
	forEachRunStore(t, func(t *testing.T, store logStore) {
		refused := &refusedBreach{logStore: store}
		refused.left.Store(1 << 20)
		s := newCapStack(t, refused)
		s.x.MaxAttempts = 1
		run := s.newRun(t, webhook.WorkflowMultiNode, `{}`, timeout1s)
		s.clk.Set(run.CreatedAt.Add(2 * time.Minute))
		if retry := s.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("retry %v: the run is left live", retry)
		}
		got := s.get(t, run.ID)
		if got.Status != runs.StatusFailed || terminalVersions(got) != 1 || !strings.Contains(got.Error, "breached cap") {
			t.Fatalf("run %s (error %q), %d terminal versions; want failed once, the refused breach named", got.Status, got.Error, terminalVersions(got))
		}
	})
}
