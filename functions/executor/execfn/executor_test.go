package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// receiver is a webhook provider on loopback that records every delivery's
// Idempotency-Key and can cut the first n deliveries (close the connection
// after reading the request, so the sender cannot know the outcome) or
// answer them 503.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	keys     []string
	cut, err atomic.Int32
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body)
		r.mu.Lock()
		r.keys = append(r.keys, req.Header.Get("Idempotency-Key"))
		r.mu.Unlock()
		if r.cut.Add(-1) >= 0 {
			hj, _ := w.(http.Hijacker)
			c, _, _ := hj.Hijack()
			c.Close()
			return
		}
		if r.err.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

type fixture struct {
	runs *hostruns.MemRuns
	l    *ledger.Ledger
	x    *Executor
}

func newFixture(t *testing.T) *fixture {
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{runs: hostruns.NewMemRuns(), l: l}
	f.x = &Executor{Runs: f.runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Webhook: &webhook.Webhook{
		Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		MaxTries: 5, WaitInline: time.Second,
	}}
	return f
}

func (f *fixture) webhookRun(t *testing.T, url string) hostruns.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": url, "payload": map[string]any{"hello": "world"}})
	r := hostruns.NewRun("acme", webhook.WorkflowWebhook, in, time.Now())
	if err := f.runs.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func insert(id string, r hostruns.Run) stream.StreamRecord {
	return stream.StreamRecord{EventID: id, EventName: "INSERT", NewImage: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: r.ID}, "tenant": &types.AttributeValueMemberS{Value: r.Tenant},
		"workflowId": &types.AttributeValueMemberS{Value: r.WorkflowID}, "status": &types.AttributeValueMemberS{Value: string(r.Status)},
	}}
}

func (f *fixture) status(t *testing.T, id string) hostruns.Status {
	r, err := f.runs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func TestWebhookFirstDeliveryCut(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	rc.cut.Store(1)
	run := f.webhookRun(t, rc.srv.URL+"/hook")
	if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v", retry)
	}
	keys := rc.seen()
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] == "" {
		t.Fatalf("provider saw keys %q: want the same key twice", keys)
	}
	if s := f.status(t, run.ID); s != hostruns.StatusCompleted {
		t.Fatalf("status %s", s)
	}
	p, err := f.l.Witness(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Effects) != 2 || p.Effects[0].State != ledger.AttemptEscaped || p.Effects[1].State != ledger.AttemptCompleted ||
		p.Effects[0].EffectID != p.Effects[1].EffectID || p.Effects[0].ProviderKey != keys[0] {
		t.Fatalf("witness %+v", p.Effects)
	}
	// A duplicate stream delivery (and a batch retry) changes nothing.
	f.runs.Transition(context.Background(), run.ID, []hostruns.Status{hostruns.StatusCompleted}, hostruns.StatusRunning, "", time.Now())
	for i := 0; i < 3; i++ {
		if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("retry %v", retry)
		}
	}
	if n := len(rc.seen()); n != 2 {
		t.Fatalf("provider saw %d deliveries after duplicate stream deliveries", n)
	}
}

func TestWebhook5xxRetriedThenExhausted(t *testing.T) {
	f := newFixture(t)
	rc := newReceiver(t)
	rc.err.Store(2)
	run := f.webhookRun(t, rc.srv.URL)
	f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)})
	if keys := rc.seen(); len(keys) != 3 || keys[0] != keys[2] {
		t.Fatalf("keys %q", keys)
	}
	if s := f.status(t, run.ID); s != hostruns.StatusCompleted {
		t.Fatalf("status %s", s)
	}

	rc2 := newReceiver(t)
	rc2.err.Store(100)
	run2 := f.webhookRun(t, rc2.srv.URL)
	f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e2", run2)})
	if n := len(rc2.seen()); n != 5 {
		t.Fatalf("%d tries, want MaxTries=5", n)
	}
	r, _ := f.runs.Get(context.Background(), run2.ID)
	if r.Status != hostruns.StatusFailed || r.Error == "" {
		t.Fatalf("run %+v", r)
	}
}

func TestWebhook4xxIsRecordedFailure(t *testing.T) {
	f := newFixture(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1); w.WriteHeader(422) }))
	defer srv.Close()
	run := f.webhookRun(t, srv.URL)
	f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)})
	if n.Load() != 1 || f.status(t, run.ID) != hostruns.StatusFailed {
		t.Fatalf("%d deliveries, status %s", n.Load(), f.status(t, run.ID))
	}
	// Resume (the run is put back to running): the recorded failure is
	// replayed, nothing is sent again.
	f.runs.Transition(context.Background(), run.ID, []hostruns.Status{hostruns.StatusFailed}, hostruns.StatusRunning, "", time.Now())
	if err := f.x.Execute(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 {
		t.Fatalf("%d deliveries after resume", n.Load())
	}
}

func TestConcurrentExecutorsFireOnce(t *testing.T) {
	f := newFixture(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		time.Sleep(20 * time.Millisecond)
		w.WriteHeader(200)
	}))
	defer srv.Close()
	run := f.webhookRun(t, srv.URL)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)})
		}()
	}
	wg.Wait()
	// Stragglers that lost the race may have asked for a retry; redeliver.
	for i := 0; i < 3; i++ {
		f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)})
	}
	if n.Load() != 1 || f.status(t, run.ID) != hostruns.StatusCompleted {
		t.Fatalf("%d deliveries, status %s", n.Load(), f.status(t, run.ID))
	}
}

func TestCrashAfterFireResumesWithSameKey(t *testing.T) {
	// An executor that crashed after the fire mark (the provider may have
	// received the request) leaves the claim firing; once its lease ends
	// the resumed run re-executes the node from its start, reclaims the
	// effect (the stalled attempt becomes escaped) and sends the SAME key.
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Lease: time.Minute, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock}}, Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runs := hostruns.NewMemRuns()
	rc := newReceiver(t)
	x := &Executor{Runs: runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond}}
	f := &fixture{runs: runs, l: l, x: x}
	run := f.webhookRun(t, rc.srv.URL)
	id, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run.ID, NodeID: webhook.NodeDeliver, Ordinal: 0, Provider: "webhook"})
	crash := errors.New("crash")
	func() {
		defer func() { _ = recover() }()
		_, _ = l.Do(context.Background(), ledger.Effect{Identity: id, RunID: run.ID, NodeID: webhook.NodeDeliver},
			func(ctx context.Context, c ledger.Call) ([]byte, error) {
				req, _ := http.NewRequest("POST", rc.srv.URL, nil)
				req.Header.Set("Idempotency-Key", c.ProviderKey)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				panic(crash) // the process dies after the provider got it
			})
	}()
	runs.Transition(context.Background(), run.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", now)
	// Before the lease ends the effect is in flight: the run is retried later.
	if err := x.Execute(context.Background(), run.ID); err == nil || !errors.Is(err, ledger.ErrInFlight) {
		t.Fatalf("before lease end: %v", err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if err := x.Execute(context.Background(), run.ID); err != nil {
		t.Fatal(err)
	}
	keys := rc.seen()
	if len(keys) != 2 || keys[0] != keys[1] {
		t.Fatalf("keys %q", keys)
	}
	p, _ := l.Witness(context.Background(), run.ID)
	if len(p.Effects) != 2 || p.Effects[0].State != ledger.AttemptEscaped || p.Effects[1].State != ledger.AttemptCompleted {
		t.Fatalf("witness %+v", p.Effects)
	}
}

func TestCancelledRunIsSkipped(t *testing.T) {
	f := newFixture(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1) }))
	defer srv.Close()
	run := f.webhookRun(t, srv.URL)
	f.runs.Transition(context.Background(), run.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusCancelled, "", time.Now())
	if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil || n.Load() != 0 {
		t.Fatalf("retry %v, %d deliveries", retry, n.Load())
	}
	if f.status(t, run.ID) != hostruns.StatusCancelled {
		t.Fatal("status changed")
	}
}

func TestRefusedDestinationFailsRun(t *testing.T) {
	f := newFixture(t)
	f.x.Webhook.Policy.AllowLoopback = false // the run was accepted under another policy
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	run := f.webhookRun(t, "http://"+ln.Addr().String()+"/")
	f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)})
	r, _ := f.runs.Get(context.Background(), run.ID)
	if r.Status != hostruns.StatusFailed {
		t.Fatalf("run %+v", r)
	}
}

func TestBatchFailureReportsTail(t *testing.T) {
	f := newFixture(t)
	// The run exists (its failure is counted); its image carries no
	// status, so the executor reads it, and the read fails.
	stored := hostruns.NewRun("acme", "conformance-noop", nil, time.Now())
	if err := f.runs.Create(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	f.x.Runs = failingRuns{f.runs}
	r1 := hostruns.Run{ID: stored.ID}
	retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{
		{EventID: "m", EventName: "MODIFY"}, insert("a", r1), insert("b", r1),
	})
	if len(retry) != 2 || retry[0] != "a" || retry[1] != "b" {
		t.Fatalf("retry %v", retry)
	}
}

type failingRuns struct{ *hostruns.MemRuns }

func (failingRuns) Get(context.Context, string) (hostruns.Run, error) {
	return hostruns.Run{}, errors.New("throttled")
}

// stampedRuns serves runs with their recipe stamps replaced, as a run
// recorded by another kit version (a v1 history) or before stamps existed
// would be read.
type stampedRuns struct {
	*hostruns.MemRuns
	stamps identity.Stamps
}

func (s stampedRuns) Get(ctx context.Context, id string) (hostruns.Run, error) {
	r, err := s.MemRuns.Get(ctx, id)
	r.Stamps = s.stamps
	return r, err
}

func (s stampedRuns) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	r, err := s.MemRuns.Transition(ctx, id, from, to, msg, now)
	r.Stamps = s.stamps
	return r, err
}

// TestRunStampsDriveIdentity: the executor derives the webhook effect's
// identity under the run's recorded recipe stamp. A run stamped with a
// recipe this kit does not compute (or with none) is never re-keyed under
// the current recipe: nothing is sent, no effect record is written, and the
// run ends failed with the reason; the witness stays empty.
func TestRunStampsDriveIdentity(t *testing.T) {
	for _, stamps := range []identity.Stamps{
		{ActivityIdentityRecipe: "openwop-activity-v1", SemanticRequestRecipe: "openwop-semantic-request-v1"},
		{},
	} {
		f := newFixture(t)
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { n.Add(1) }))
		run := f.webhookRun(t, srv.URL)
		f.x.Runs = stampedRuns{f.runs, stamps}
		if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("%+v: retry %v", stamps, retry)
		}
		r, _ := f.runs.Get(context.Background(), run.ID)
		if n.Load() != 0 || r.Status != hostruns.StatusFailed || !strings.Contains(r.Error, "recipe") {
			t.Fatalf("%+v: %d deliveries, run %+v", stamps, n.Load(), r)
		}
		if p, err := f.l.Witness(context.Background(), run.ID); err != nil || len(p.Effects) != 0 {
			t.Fatalf("%+v: witness %+v %v", stamps, p, err)
		}
		srv.Close()
	}
	// The current stamp: the effect is recorded under exactly the identity
	// the stamp computes.
	f := newFixture(t)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	run := f.webhookRun(t, srv.URL)
	f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)})
	want, _ := run.Stamps.ActivityIdentity(identity.Activity{Tenant: "acme", RunID: run.ID, NodeID: webhook.NodeDeliver, Ordinal: 0, Provider: "webhook"})
	p, _ := f.l.Witness(context.Background(), run.ID)
	if len(p.Effects) != 1 || p.Effects[0].EffectID != want.EffectID || f.status(t, run.ID) != hostruns.StatusCompleted {
		t.Fatalf("witness %+v, want effect %s", p.Effects, want.EffectID)
	}
}

// TestAttemptCapEndsRun: an effect record at the ledger's attempt cap
// (ledger.Config.MaxAttempts) fires nothing more, so the run ends failed
// instead of being retried by the stream until its records expire.
func TestAttemptCapEndsRun(t *testing.T) {
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	rc.err.Store(100)
	runs := hostruns.NewMemRuns()
	x := &Executor{Runs: runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Webhook: &webhook.Webhook{
		Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, MaxBackoff: time.Millisecond, WaitInline: time.Second}}
	f := &fixture{runs: runs, l: l, x: x}
	run := f.webhookRun(t, rc.srv.URL)
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v: a capped effect is retried forever", retry)
	}
	r, _ := runs.Get(context.Background(), run.ID)
	if r.Status != hostruns.StatusFailed || len(rc.seen()) != 2 {
		t.Fatalf("run %+v after %d deliveries", r, len(rc.seen()))
	}
}

// TestLastTryFailsRun: a run whose node keeps failing transiently (here its
// effect is held in flight by a live executor elsewhere) is retried by the
// stream, each failure counted on the run; the stream's last try
// (MaxAttempts) ends it "failed" with the reason, instead of leaving it
// "running" once its record is sent to the on-failure queue. The executor
// itself never fired the effect.
func TestLastTryFailsRun(t *testing.T) {
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Lease: time.Minute, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	runs := hostruns.NewMemRuns()
	// The holder below is alive: the last try's wait (which the real clock
	// does not see pass here) ends with the claim still live, and only then
	// is the run given up.
	var waits atomic.Int32
	x := &Executor{Runs: runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), MaxAttempts: 3,
		Test:    TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { waits.Add(1); return nil }}},
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond}}
	f := &fixture{runs: runs, l: l, x: x}
	run := f.webhookRun(t, srv.URL)
	// Another executor holds the effect's claim and is still firing.
	id, _ := webhook.WebhookIdentity(run)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = l.Do(context.Background(), ledger.Effect{Identity: id, RunID: run.ID, NodeID: webhook.NodeDeliver},
			func(context.Context, ledger.Call) ([]byte, error) { close(holding); <-release; return nil, nil })
	}()
	<-holding
	var done2 chan struct{} // set below
	defer func() {
		close(release)
		<-done
		if done2 != nil {
			<-done2
		}
	}()
	for try := 1; try <= 2; try++ {
		if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); len(retry) != 1 {
			t.Fatalf("try %d: retry %v, want the record retried", try, retry)
		}
		r, _ := runs.Get(context.Background(), run.ID)
		if r.Status != hostruns.StatusRunning || r.Failures != try || !strings.Contains(r.LastError, "in flight") {
			t.Fatalf("try %d: run %+v", try, r)
		}
	}
	if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("last try: retry %v, want the record done", retry)
	}
	r, _ := runs.Get(context.Background(), run.ID)
	if r.Status != hostruns.StatusFailed || r.Failures != 3 || !strings.Contains(r.Error, "gave up after 3 attempts") {
		t.Fatalf("after the last try: %+v", r)
	}
	if waits.Load() != 1 {
		t.Fatalf("the last try waited %d times, want once", waits.Load())
	}
	if n.Load() != 0 {
		t.Fatalf("%d deliveries", n.Load())
	}
	// MaxAttempts 0 (default): failures are counted, the run is never
	// given up by the executor.
	x.MaxAttempts = 0
	run2 := f.webhookRun(t, srv.URL)
	id2, _ := webhook.WebhookIdentity(run2)
	hold2 := make(chan struct{})
	done2 = make(chan struct{})
	go func() {
		defer close(done2)
		_, _ = l.Do(context.Background(), ledger.Effect{Identity: id2, RunID: run2.ID, NodeID: webhook.NodeDeliver},
			func(context.Context, ledger.Call) ([]byte, error) { close(hold2); <-release; return nil, nil })
	}()
	<-hold2
	for try := 1; try <= 4; try++ {
		if retry := x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e2", run2)}); len(retry) != 1 {
			t.Fatalf("unbounded try %d: retry %v", try, retry)
		}
	}
	if r, _ := runs.Get(context.Background(), run2.ID); r.Status != hostruns.StatusRunning || r.Failures != 4 {
		t.Fatalf("unbounded: %+v", r)
	}
}

// TestFailureOfEndedRunIsDropped: a failed execution of a run that has
// meanwhile ended (a cancel landed) is not retried, and the finished run's
// record is left as it was.
func TestFailureOfEndedRunIsDropped(t *testing.T) {
	f := newFixture(t)
	f.x.MaxAttempts = 3
	run := f.webhookRun(t, "https://example.invalid/hook")
	ctx := context.Background()
	ended, err := f.runs.Transition(ctx, run.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusCancelled, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !f.x.giveUp(ctx, run.ID, errors.New("effect in flight")) {
		t.Fatal("the failure of an ended run was left to the stream's retries")
	}
	if r, _ := f.runs.Get(ctx, run.ID); r.Failures != 0 || r.LastError != "" || !r.UpdatedAt.Equal(ended.UpdatedAt) || r.Status != hostruns.StatusCancelled {
		t.Fatalf("ended run changed: %+v", r)
	}
}
