package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/faultrx"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// clock is the injected clock of a fault test: ledger, webhook and executor
// share it; it moves only when the test says so.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.t) {
		c.t = t
	}
}

// faultStack is the executor on an emulator: DynamoRuns and the DynamoDB
// ledger, with every clock injected and no in-process waiting.
type faultStack struct {
	runs   *runs.DynamoRuns
	l      *ledger.Ledger
	x      *Executor
	clk    *clock
	effTbl string
	e      *dynamotest.Emulator
}

const faultMaxTries = 4

// faultDeliveryTimeout is each delivery's time limit: the hang case waits
// it out once, and an answer a loaded machine slows must not miss it (at
// 300 ms one could: a delivery that succeeded was then another attempt,
// and the counts below were off).
const faultDeliveryTimeout = 10 * time.Second

func newFaultStack(t *testing.T, e *dynamotest.Emulator, clk *clock, runsTbl, effTbl string) *faultStack {
	c := e.Client(dynamotest.FastRetries)
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: effTbl})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: st, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}, Jitter: func(d time.Duration) time.Duration { return d }}})
	if err != nil {
		t.Fatal(err)
	}
	runs := &runs.DynamoRuns{Client: c, Table: runsTbl}
	w := &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Timeout: faultDeliveryTimeout,
		MaxTries: faultMaxTries, Budget: 15 * time.Minute, Backoff: time.Second, MaxBackoff: 10 * time.Second, Test: webhook.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}}
	x := &Executor{Runs: runs, Webhook: w, Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	return &faultStack{runs: runs, l: l, x: x, clk: clk, effTbl: effTbl, e: e}
}

func (s *faultStack) newRun(t *testing.T, url string) runs.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": url + "/hook", "payload": map[string]any{"order": 42}})
	r := runs.NewRun("acme", webhook.WorkflowWebhook, in, s.clk.Now())
	if err := s.runs.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *faultStack) run(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := s.runs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// firedRows returns the witness rows of the run that carry a fire time:
// the attempts that may have reached the receiver.
func firedRows(t *testing.T, l *ledger.Ledger, runID string) []ledger.WitnessRow {
	t.Helper()
	p, err := l.Witness(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []ledger.WitnessRow
	for _, r := range p.Effects {
		if r.Fired && !r.FiredAt.IsZero() {
			out = append(out, r)
		}
	}
	return out
}

// TestFaultInjectedReceiverMatchesWitness drives webhook runs against a
// receiver that misbehaves the way providers do, on the emulators, through
// the stream handler and the parked-run schedule only (no in-process
// waiting, injected clock): for every fault the receiver's delivery count
// equals the witness rows carrying a fire time, and the run ends as the
// fault dictates.
func TestFaultInjectedReceiverMatchesWitness(t *testing.T) {
	cases := []faultCase{
		{"reset-after-body", faultrx.Options{Plan: faultrx.Sequence(faultrx.ResetAfterBody, faultrx.ResetAfterBody, faultrx.OK)}, runs.StatusCompleted, 3},
		{"hang", faultrx.Options{Plan: faultrx.Sequence(faultrx.Hang, faultrx.OK)}, runs.StatusCompleted, 2},
		{"500", faultrx.Options{Plan: faultrx.Sequence(faultrx.Status500, faultrx.Status500, faultrx.OK)}, runs.StatusCompleted, 3},
		{"503-forever", faultrx.Options{Plan: faultrx.Always(faultrx.Status503)}, runs.StatusFailed, faultMaxTries},
		{"429-retry-after-30", faultrx.Options{Plan: faultrx.Sequence(faultrx.TooMany("30"), faultrx.OK)}, runs.StatusCompleted, 2},
		{"close-between-attempts", faultrx.Options{Plan: faultrx.Sequence(faultrx.Status503, faultrx.CloseAfterBody, faultrx.Status503, faultrx.OK), CloseIdle: true}, runs.StatusCompleted, 4},
		// An answer a loaded machine slows is not a failed delivery.
		{"slow-ok", faultrx.Options{Plan: faultrx.Sequence(faultrx.Fault{Status: 200, Delay: time.Second})}, runs.StatusCompleted, 1},
	}
	// The engines run side by side (each on its own tables and engine
	// process): the hang case waits out a real delivery timeout on each.
	for _, kind := range dynamotest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testFaultInjectedReceiver(t, dynamotest.Start(t, kind), cases)
		})
	}
}

type faultCase struct {
	name      string
	opts      faultrx.Options
	want      runs.Status
	wantCount int
}

func testFaultInjectedReceiver(t *testing.T, e *dynamotest.Emulator, cases []faultCase) {
	runsTbl, effTbl := e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
			s := newFaultStack(t, e, clk, runsTbl, effTbl)
			opts := tc.opts
			opts.T = t
			rx := faultrx.New(opts)
			defer rx.Close()
			run := s.newRun(t, rx.URL())
			if retry := s.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
				t.Fatalf("stream record retried: %v", retry)
			}
			var wakes []time.Time
			for i := 0; i < 10; i++ {
				r := s.run(t, run.ID)
				if r.Status.Terminal() {
					break
				}
				if r.Wake.At.IsZero() {
					t.Fatalf("run %s is %s and not parked", run.ID, r.Status)
				}
				// Nothing is due a millisecond early.
				clk.Set(r.Wake.At.Add(-time.Millisecond))
				before := rx.Count()
				if n, err := s.x.ResumeDue(context.Background()); err != nil || n != 0 || rx.Count() != before {
					t.Fatalf("early pass resumed %d runs (%v), %d new deliveries", n, err, rx.Count()-before)
				}
				wakes = append(wakes, r.Wake.At)
				clk.Set(r.Wake.At)
				if _, err := s.x.ResumeDue(context.Background()); err != nil {
					t.Fatalf("pass: %v", err)
				}
			}
			r := s.run(t, run.ID)
			if r.Status != tc.want || !r.Wake.At.IsZero() {
				t.Fatalf("run ended %s (wake %v, error %q), want %s", r.Status, r.Wake.At, r.Error, tc.want)
			}
			fired := firedRows(t, s.l, run.ID)
			if n := rx.Count(); n != len(fired) || n != tc.wantCount {
				t.Fatalf("receiver counted %d deliveries, witness has %d rows with a fire time; want %d", n, len(fired), tc.wantCount)
			}
			for i, d := range rx.Deliveries() {
				if d.Key != fired[i].ProviderKey || fired[i].MaxAttempts != faultMaxTries {
					t.Fatalf("delivery %d key %q; witness row %+v", d.N, d.Key, fired[i])
				}
			}
			// Each try fired no earlier than it was scheduled.
			for i := 1; i < len(fired); i++ {
				if fired[i].FiredAt.Before(wakes[i-1]) {
					t.Fatalf("attempt %d fired at %s, before its schedule %s", i+1, fired[i].FiredAt, wakes[i-1])
				}
			}
			if tc.name == "429-retry-after-30" {
				if gap := fired[1].FiredAt.Sub(fired[0].FiredAt); gap < 30*time.Second {
					t.Fatalf("429 with Retry-After: 30 retried after %s", gap)
				}
			}
		})
	}
}

// TestCrashBetweenAttemptsResumesOnSchedule: the executor that got a 429
// with Retry-After: 30 dies; another one (fresh ledger and store clients,
// as after a cold start) finds the run parked in the run record and the
// effect's next attempt in the effect record, fires nothing before the
// time, and resumes on schedule with the same provider key. Also when the
// crash came after the effect was scheduled but before the run was parked:
// the stream's retry of the run's record parks it without a send.
func TestCrashBetweenAttemptsResumesOnSchedule(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		runsTbl, effTbl := e.CreateTable(t, "RunsTable"), e.CreateTable(t, "EffectsTable")
		ctx := context.Background()
		for _, parked := range []bool{true, false} {
			clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
			rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(faultrx.TooMany("30"), faultrx.OK)})
			first := newFaultStack(t, e, clk, runsTbl, effTbl)
			var noted []time.Time // Executor.Parked
			first.x.Parked = func(at time.Time) { noted = append(noted, at) }
			run := first.newRun(t, rx.URL())
			t0 := clk.Now()
			if parked {
				first.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)})
			} else {
				// The executor dies right after the attempt: the effect's
				// schedule is recorded, the run is not parked.
				if _, err := first.runs.Transition(ctx, run.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", clk.Now()); err != nil {
					t.Fatal(err)
				}
				if _, err := first.x.Webhook.Deliver(ctx, first.run(t, run.ID)); err == nil {
					t.Fatal("first attempt succeeded")
				}
			}
			// A new executor.
			second := newFaultStack(t, e, clk, runsTbl, effTbl)
			second.x.Parked = first.x.Parked
			if !parked {
				clk.Set(t0.Add(5 * time.Second))
				if retry := second.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil || rx.Count() != 1 {
					t.Fatalf("redelivered stream record: retry %v, %d deliveries", retry, rx.Count())
				}
			}
			r := second.run(t, run.ID)
			if r.Wake.At.Sub(t0) < 30*time.Second {
				t.Fatalf("parked=%v: run wakes at %s, %s after the 429 asked for 30 s", parked, r.Wake.At, r.Wake.At.Sub(t0))
			}
			if len(noted) != 1 || !noted[0].Truncate(time.Millisecond).Equal(r.Wake.At) {
				t.Fatalf("parked=%v: Executor.Parked got %v, want the run's wake time %s once", parked, noted, r.Wake.At)
			}
			clk.Set(t0.Add(29 * time.Second))
			if n, _ := second.x.ResumeDue(ctx); n != 0 || rx.Count() != 1 {
				t.Fatalf("resumed %d runs %s early, %d deliveries", n, r.Wake.At.Sub(clk.Now()), rx.Count())
			}
			// Even a direct execution before the time sends nothing.
			if err := second.x.Execute(ctx, run.ID); err != nil || rx.Count() != 1 {
				t.Fatalf("early execution: %v, %d deliveries", err, rx.Count())
			}
			clk.Set(r.Wake.At)
			if n, err := second.x.ResumeDue(ctx); n != 1 || err != nil {
				t.Fatalf("on time: resumed %d (%v)", n, err)
			}
			if st := second.run(t, run.ID).Status; st != runs.StatusCompleted {
				t.Fatalf("parked=%v: status %s", parked, st)
			}
			d := rx.Deliveries()
			fired := firedRows(t, second.l, run.ID)
			if len(d) != 2 || d[0].Key != d[1].Key || len(fired) != 2 || fired[1].FiredAt.Sub(fired[0].FiredAt) < 30*time.Second {
				t.Fatalf("deliveries %+v, witness %+v", d, fired)
			}
			rx.Close()
		}
	})
}
