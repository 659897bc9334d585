package execfn

import (
	"context"
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
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// fakeClock is an injected clock; sleepers advance it (to at least the
// time they were called at plus their duration), so waiting out a lease
// takes no real time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) sleeper(waits *[]time.Duration, mu *sync.Mutex) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		c.mu.Lock()
		c.t = c.t.Add(d)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// crashedFixture is a webhook run whose effect an executor claimed, sent
// to the receiver and then crashed on (the claim is left firing, its lease
// one minute on the fake clock).
type crashedFixture struct {
	clock *fakeClock
	runs  *runs.MemRuns
	l     *ledger.Ledger
	rc    *receiver
	run   runs.Run
	waits []time.Duration
	mu    sync.Mutex
}

func newCrashedFixture(t *testing.T, ledgerWait time.Duration) *crashedFixture {
	t.Helper()
	c := &crashedFixture{clock: &fakeClock{t: time.Now().UTC()}, runs: runs.NewMemRuns(), rc: newReceiver(t)}
	var err error
	c.l, err = ledger.New(ledger.Config{Store: ledgermem.New(), Lease: time.Minute, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: c.clock.Now}}, Wait: ledgerWait,
		PollInterval: 5 * time.Millisecond, Heartbeat: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{runs: c.runs, l: c.l}
	c.run = f.webhookRun(t, c.rc.srv.URL)
	id, err := webhook.WebhookIdentity(c.run)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = c.l.Do(context.Background(), ledger.Effect{Identity: id, RunID: c.run.ID, NodeID: webhook.NodeDeliver},
			func(ctx context.Context, call ledger.Call) ([]byte, error) {
				req, _ := http.NewRequest("POST", c.rc.srv.URL, strings.NewReader(`{"hello":"world"}`))
				req.Header.Set("Idempotency-Key", call.ProviderKey)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
				panic("crash") // the instance dies after the provider got the request
			})
	}()
	return c
}

func (c *crashedFixture) executor(maxAttempts int) *Executor {
	return &Executor{Runs: c.runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxAttempts: maxAttempts,
		Test:    TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: c.clock.Now, SleepFunc: c.clock.sleeper(&c.waits, &c.mu)}},
		Webhook: &webhook.Webhook{Ledger: c.l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond}}
}

func (c *crashedFixture) waited() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// checkDelivered asserts the provider saw the same key twice (the crashed
// attempt and one reclaim), the witness shows escaped then completed, and
// the run completed.
func (c *crashedFixture) checkDelivered(t *testing.T) {
	t.Helper()
	keys := c.rc.seen()
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] == "" {
		t.Fatalf("provider saw keys %q: want the crashed attempt's key once more", keys)
	}
	p, err := c.l.Witness(context.Background(), c.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Effects) != 2 || p.Effects[0].State != ledger.AttemptEscaped || p.Effects[1].State != ledger.AttemptCompleted ||
		p.Effects[0].ProviderKey != keys[0] || p.Effects[1].ProviderKey != keys[0] {
		t.Fatalf("witness %+v: want escaped then completed under one key", p.Effects)
	}
	if r, _ := c.runs.Get(context.Background(), c.run.ID); r.Status != runs.StatusCompleted {
		t.Fatalf("run %s (%s / %s)", r.Status, r.Error, r.LastError)
	}
}

// TestLastTryWaitsOutCrashedClaim: the executor holding the effect crashed
// after sending; the stream's tries run out while its claim is live. The
// last try waits the claim out (injected sleeper, no real wait), executes
// once more, reclaims (the stalled attempt becomes escaped) and sends the
// same provider key: the run succeeds, the provider performs one effect.
func TestLastTryWaitsOutCrashedClaim(t *testing.T) {
	c := newCrashedFixture(t, -1)
	x := c.executor(3)
	rec := insert("e1", c.run)
	for try := 1; try <= 2; try++ {
		if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{rec}); len(retry) != 1 {
			t.Fatalf("try %d: retry %v", try, retry)
		}
	}
	if w := c.waited(); len(w) != 0 {
		t.Fatalf("tries before the last waited %v", w)
	}
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{rec}); retry != nil {
		t.Fatalf("last try: retry %v", retry)
	}
	w := c.waited()
	if len(w) != 1 || w[0] < time.Minute || w[0] > time.Minute+2*time.Second {
		t.Fatalf("waits %v: want one wait of the claim's remaining lease (+1 s)", w)
	}
	c.checkDelivered(t)
	if r, _ := c.runs.Get(context.Background(), c.run.ID); r.Failures != 3 {
		t.Fatalf("failures %d, want 3 counted", r.Failures)
	}
	// A duplicate delivery afterwards fires nothing.
	if retry := c.executor(3).HandleRecords(context.Background(), []stream.StreamRecord{rec}); retry != nil {
		t.Fatalf("duplicate: retry %v", retry)
	}
	c.checkDelivered(t)
}

// TestLastTryWaitFitsDeadline: the last try waits only when RetryAfter +
// 1 s + LastTryMargin fits before the context deadline; otherwise it gives
// up at once (nothing sent again), as it does for any other error.
func TestLastTryWaitFitsDeadline(t *testing.T) {
	t.Run("too short a deadline: given up, no wait", func(t *testing.T) {
		c := newCrashedFixture(t, -1)
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
		defer cancel()
		// 61 s + the default 30 s margin does not fit in 80 s.
		if retry := c.executor(1).HandleRecords(ctx, []stream.StreamRecord{insert("e1", c.run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
		if w := c.waited(); len(w) != 0 {
			t.Fatalf("waited %v", w)
		}
		r, _ := c.runs.Get(ctx, c.run.ID)
		if r.Status != runs.StatusFailed || !strings.Contains(r.Error, "gave up after 1 attempts") || !strings.Contains(r.Error, "in flight") {
			t.Fatalf("run %+v", r)
		}
		if n := len(c.rc.seen()); n != 1 {
			t.Fatalf("%d provider requests", n)
		}
	})
	t.Run("a smaller margin fits: waited and delivered", func(t *testing.T) {
		c := newCrashedFixture(t, -1)
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
		defer cancel()
		x := c.executor(1)
		x.LastTryMargin = 5 * time.Second
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", c.run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
		if w := c.waited(); len(w) != 1 {
			t.Fatalf("waited %v", w)
		}
		c.checkDelivered(t)
	})
	t.Run("context ends during the wait: given up", func(t *testing.T) {
		c := newCrashedFixture(t, -1)
		ctx, cancel := context.WithCancel(context.Background())
		x := c.executor(1)
		x.Test.Clock = ledgertest.ClockFuncs{NowFunc: c.clock.Now, SleepFunc: func(context.Context, time.Duration) error { cancel(); return context.Canceled }}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", c.run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
		if r, _ := c.runs.Get(context.Background(), c.run.ID); r.Status != runs.StatusFailed {
			t.Fatalf("run %+v", r)
		}
		if n := len(c.rc.seen()); n != 1 {
			t.Fatalf("%d provider requests", n)
		}
	})
	t.Run("other errors are not waited on", func(t *testing.T) {
		f := newFixture(t)
		var waits atomic.Int32
		f.x.MaxAttempts = 1
		f.x.Test.Clock = ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { waits.Add(1); return nil }}
		run := f.webhookRun(t, "https://example.invalid/hook")
		if !f.x.giveUp(context.Background(), run.ID, errors.New("store unavailable")) {
			t.Fatal("last try left to the stream")
		}
		if r, _ := f.runs.Get(context.Background(), run.ID); r.Status != runs.StatusFailed || waits.Load() != 0 {
			t.Fatalf("run %+v, %d waits", r, waits.Load())
		}
	})
}

// TestLastTryConcurrentWaiters: several executors reach their last try on
// the same crashed claim at once; each waits it out and executes again.
// Exactly one reclaims and sends (same key), the others wait for its
// outcome through the ledger (Config.Wait) and replay it: one new request,
// the run completed once.
func TestLastTryConcurrentWaiters(t *testing.T) {
	c := newCrashedFixture(t, time.Second)
	// Each sleeper moves the clock to the same instant: past the lease, not
	// past the winner's new one.
	start := c.clock.Now()
	sleep := func(ctx context.Context, d time.Duration) error {
		c.clock.mu.Lock()
		if to := start.Add(d); to.After(c.clock.t) {
			c.clock.t = to
		}
		c.clock.mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := c.executor(1)
			x.Test.Clock = ledgertest.ClockFuncs{NowFunc: c.clock.Now, SleepFunc: sleep}
			x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", c.run)})
		}()
	}
	wg.Wait()
	c.checkDelivered(t)
}

// TestLastTryAfterItsAttemptWasTakenOver: the stream's last try delivers
// the webhook, but stalls past its lease (no heartbeat) before the answer
// comes; another executor reclaims the attempt, delivers under the same
// key and records the effect completed. The stalled try's outcome is then
// refused (ErrLeaseLost). The last try does not end the run failed on
// that: the effect is recorded completed, so it executes once more, as the
// next try would, replays the outcome and completes the run.
func TestLastTryAfterItsAttemptWasTakenOver(t *testing.T) {
	clk := &fakeClock{t: time.Now().UTC()}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Lease: time.Minute, Heartbeat: -1, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	rc := newFirstHeldReceiver(t, func(*http.Request) bool {
		<-release // the first try's answer comes late
		return true
	})
	arrived, srv := rc.arrived, rc.srv
	f := &fixture{runs: runs.NewMemRuns(), l: l}
	run := f.webhookRun(t, srv.URL)
	var waits []time.Duration
	var wmu sync.Mutex
	hook := func() *webhook.Webhook {
		return &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, Timeout: time.Minute}
	}
	x := &Executor{Runs: f.runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxAttempts: 1, Webhook: hook(),
		Test: TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now, SleepFunc: clk.sleeper(&waits, &wmu)}}}
	done := make(chan []string, 1)
	go func() { done <- x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}) }()
	<-arrived

	// The lease runs out; another executor reclaims and delivers.
	clk.mu.Lock()
	clk.t = clk.t.Add(2 * time.Minute)
	clk.mu.Unlock()
	if _, err := hook().Deliver(context.Background(), run); err != nil {
		t.Fatalf("the other executor's delivery: %v", err)
	}
	<-arrived
	close(release)
	if retry := <-done; retry != nil {
		t.Fatalf("last try: retry %v", retry)
	}
	r, _ := f.runs.Get(context.Background(), run.ID)
	if r.Status != runs.StatusCompleted {
		t.Fatalf("run %s (%s); want completed: its effect is recorded completed", r.Status, r.Error)
	}
	p, err := l.Witness(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Effects); n != 2 || p.Effects[1].State != ledger.AttemptCompleted {
		t.Fatalf("witness %+v", p.Effects)
	}
	if keys := rc.seen(); len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("receiver keys %q: want the two deliveries under one key", keys)
	}
}

// failingRenewals is a ledger store whose heartbeat renewals (a firing
// record replaced by its own owner, still firing) fail once fail is set,
// as on an effects table that throttles past the SDK's retries.
type failingRenewals struct {
	ledger.Store
	fail   atomic.Bool
	failed chan struct{} // one per renewal failed
}

func (s *failingRenewals) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if s.fail.Load() && next.State == ledger.StateFiring && want.State == ledger.StateFiring && next.Owner == want.Owner {
		s.failed <- struct{}{}
		return false, nil, errors.New("injected throttling")
	}
	return s.Store.Replace(ctx, next, want, now)
}

// TestLastTryWhoseHeartbeatGaveUp: the stream's last try delivers the
// webhook; the receiver holds the answer while the effects table refuses
// every renewal, so the heartbeat gives up and cuts the request (the
// attempt is left firing: it may have been delivered). The last try does
// not end the run failed on that: it executes once more, finds its own
// attempt in flight, waits its lease out, and the reclaim delivers under
// the same key (escaped, then completed), as for an executor that crashed.
func TestLastTryWhoseHeartbeatGaveUp(t *testing.T) {
	clk := &fakeClock{t: time.Now().UTC()}
	st := &failingRenewals{Store: ledgermem.New(), failed: make(chan struct{}, 4)}
	ticks := make(chan time.Time)
	l, err := ledger.New(ledger.Config{Store: st, Lease: time.Minute, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now,
			NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}}})
	if err != nil {
		t.Fatal(err)
	}
	rc := newFirstHeldReceiver(t, func(req *http.Request) bool {
		<-req.Context().Done() // no answer before the sender cuts it
		return false
	})
	arrived, srv := rc.arrived, rc.srv
	f := &fixture{runs: runs.NewMemRuns(), l: l}
	run := f.webhookRun(t, srv.URL)
	var waits []time.Duration
	var wmu sync.Mutex
	x := &Executor{Runs: f.runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxAttempts: 1,
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, Timeout: time.Minute},
		Test:    TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now, SleepFunc: clk.sleeper(&waits, &wmu)}}}
	done := make(chan []string, 1)
	go func() { done <- x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}) }()
	<-arrived
	st.fail.Store(true)
	t0 := clk.Now()
	for _, at := range []time.Duration{20 * time.Second, 40 * time.Second} {
		clk.mu.Lock()
		clk.t = t0.Add(at)
		clk.mu.Unlock()
		ticks <- time.Time{}
		<-st.failed // the renewal read the clock and failed
	}
	st.fail.Store(false)
	if retry := <-done; retry != nil {
		t.Fatalf("last try: retry %v", retry)
	}
	wantEscapedThenCompleted(t, f, run.ID, rc)
}

// firstHeldReceiver records each webhook request's Idempotency-Key and
// reports its arrival; the first request is handed to holdFirst, which may
// block, and is answered 200 only when holdFirst returns true. Every later
// request is answered 200 at once.
type firstHeldReceiver struct {
	srv     *httptest.Server
	arrived chan struct{}
	mu      sync.Mutex
	keys    []string
}

func newFirstHeldReceiver(t *testing.T, holdFirst func(*http.Request) bool) *firstHeldReceiver {
	r := &firstHeldReceiver{arrived: make(chan struct{}, 4)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body)
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		first := len(r.keys) == 1
		r.mu.Unlock()
		r.arrived <- struct{}{}
		if first && !holdFirst(req) {
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *firstHeldReceiver) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

// failingOutcome is a ledger store whose next outcome write (a firing
// record replaced by a completed one) fails, as on an effects table that
// throttles past the SDK's retries just after the provider answered.
type failingOutcome struct {
	ledger.Store
	left atomic.Int32
}

func (s *failingOutcome) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	if want.State == ledger.StateFiring && next.State == ledger.StateCompleted && s.left.Add(-1) >= 0 {
		return false, nil, errors.New("injected throttling")
	}
	return s.Store.Replace(ctx, next, want, now)
}

// TestLastTryWhoseOutcomeWriteFailed: the stream's last try delivers the
// webhook (the receiver answers 200), then the effects table fails the
// outcome write, so the attempt is left firing with no outcome: it may
// have been delivered (here it was). The last try does not end the run
// failed on that (a client would re-submit it under a new key, which no
// receiver can deduplicate): it executes once more, finds its own attempt
// in flight, waits its lease out, and the reclaim delivers under the same
// key (escaped, then completed), as after a lost attempt.
func TestLastTryWhoseOutcomeWriteFailed(t *testing.T) {
	clk := &fakeClock{t: time.Now().UTC()}
	st := &failingOutcome{Store: ledgermem.New()}
	st.left.Store(1)
	l, err := ledger.New(ledger.Config{Store: st, Lease: time.Minute, Wait: -1, Heartbeat: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	rc := newFirstHeldReceiver(t, func(*http.Request) bool { return true })
	f := &fixture{runs: runs.NewMemRuns(), l: l}
	run := f.webhookRun(t, rc.srv.URL)
	var waits []time.Duration
	var wmu sync.Mutex
	x := &Executor{Runs: f.runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxAttempts: 1,
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond},
		Test:    TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now, SleepFunc: clk.sleeper(&waits, &wmu)}}}
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("last try: retry %v", retry)
	}
	wantEscapedThenCompleted(t, f, run.ID, rc)
}

// wantEscapedThenCompleted asserts the end of a last try that executed
// once more: the run completed, its effect's witness shows the first
// attempt escaped and the second completed, and the receiver saw both
// deliveries under one key.
func wantEscapedThenCompleted(t *testing.T, f *fixture, runID string, rc *firstHeldReceiver) {
	t.Helper()
	r, _ := f.runs.Get(context.Background(), runID)
	if r.Status != runs.StatusCompleted {
		t.Fatalf("run %s (%s); want completed", r.Status, r.Error)
	}
	p, err := f.l.Witness(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Effects); n != 2 || p.Effects[0].State != ledger.AttemptEscaped || p.Effects[1].State != ledger.AttemptCompleted {
		t.Fatalf("witness %+v: want escaped, then completed", p.Effects)
	}
	if keys := rc.seen(); len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("receiver keys %q: want two deliveries under one key", keys)
	}
}
