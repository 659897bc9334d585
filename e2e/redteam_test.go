package e2e

// Red-team tests: the exactly-once claims attacked END TO END, on the
// integrated system (api handler + real idem Guard + dynamostores + runs
// store + executor + ledger on the emulators), the way a hostile reviewer
// would. docs/RED_TEAM.md lists every scenario, what held and what broke.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/executor/execfn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// rtClock is an injected clock: lease expiry without sleeps.
type rtClock struct {
	mu sync.Mutex
	t  time.Time
}

func newRTClock() *rtClock { return &rtClock{t: time.Now().UTC()} }

func (c *rtClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *rtClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rtLog collects log lines of every component, for counting decisions.
type rtLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *rtLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *rtLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *rtLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *rtLog) WithGroup(string) slog.Handler      { return l }
func (l *rtLog) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if m == msg {
			n++
		}
	}
	return n
}

// rtStack is the api function and the executor wired as functions/host/kit
// wires them (same stores, same tables, same Guard options), but with an
// injected clock and fault injectors: faults on the client of Layer 1 (and,
// transactional, the run write), runFaults on the runs store's own client.
type rtStack struct {
	e                     *dynamotest.Emulator
	clock                 *rtClock
	log                   *rtLog
	logger                *slog.Logger
	faults, runFaults     *dynamotest.Faults
	client                *dynamodb.Client
	runsTable, effTable   string
	runs                  *runs.DynamoRuns
	guard                 *idem.Guard
	api                   *apifn.Handler
	transactional         bool
	sleep                 atomic.Pointer[func(context.Context, time.Duration) error]
	guardLease, effLeases time.Duration
}

const rtLease = 30 * time.Second

func newRTStack(t *testing.T, e *dynamotest.Emulator, transactional bool) *rtStack {
	t.Helper()
	s := &rtStack{e: e, clock: newRTClock(), log: &rtLog{}, faults: dynamotest.NewFaults(), runFaults: dynamotest.NewFaults(),
		transactional: transactional, guardLease: idem.DefaultLease, effLeases: rtLease}
	s.logger = slog.New(s.log)
	s.client = e.Client(dynamotest.FastRetries, s.faults.Middleware())
	idemTable := e.CreateTable(t, "IdempotencyTable")
	s.runsTable = e.CreateTable(t, "RunsTable")
	s.effTable = e.CreateTable(t, "EffectsTable")
	st, err := idemdynamo.New(idemdynamo.Config{Client: s.client, Table: idemTable})
	must(t, err)
	s.guard, err = idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: st, Logger: s.logger, BodyTenantField: "tenantId", Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: s.clock.Now}},
		Wait: 300 * time.Millisecond})
	must(t, err)
	runsClient := s.client
	if !transactional {
		runsClient = e.Client(dynamotest.FastRetries, s.runFaults.Middleware())
	}
	s.runs = &runs.DynamoRuns{Client: runsClient, Table: s.runsTable, Transactional: transactional}
	nop := func(context.Context, time.Duration) error { return nil }
	s.sleep.Store(&nop)
	s.api, err = apifn.New(apifn.Config{Runs: s.runs, Guard: s.guard, Ledger: s.newLedger(t, e.Client()),
		Webhook: webhook.WebhookPolicy{AllowLoopback: true}, Logger: s.logger,
		Test: apifn.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: s.clock.Now, SleepFunc: func(ctx context.Context, d time.Duration) error { return (*s.sleep.Load())(ctx, d) }}}})
	must(t, err)
	return s
}

// newLedger is one executor instance's ledger over the shared effects table.
func (s *rtStack) newLedger(t *testing.T, api ledgerdynamo.API) *ledger.Ledger {
	t.Helper()
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: api, Table: s.effTable})
	must(t, err)
	l, err := ledger.New(ledger.Config{Store: st, Lease: s.effLeases, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: s.clock.Now}},
		Wait: time.Second, PollInterval: 20 * time.Millisecond, Heartbeat: -1})
	must(t, err)
	return l
}

// newExecutor is one executor instance (its own ledger and webhook client).
func (s *rtStack) newExecutor(t *testing.T, api ledgerdynamo.API) *execfn.Executor {
	l := s.newLedger(t, api)
	wh := &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, MaxTries: 3,
		Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}
	return &execfn.Executor{Runs: &runs.DynamoRuns{Client: s.e.Client(), Table: s.runsTable}, Webhook: wh,
		Test: execfn.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: s.clock.Now}}, Logger: s.logger}
}

func (s *rtStack) post(t *testing.T, tenant, key, body string) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	r, err := s.api.Handle(context.Background(), apiEvent("POST", "/runs", tenant, key, body))
	must(t, err)
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	return r, m
}

// runItems returns every run item in the runs table (fault-free client).
func (s *rtStack) runItems(t *testing.T) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(s.e.Client(), &dynamodb.ScanInput{TableName: aws.String(s.runsTable), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		must(t, err)
		out = append(out, page.Items...)
	}
	return out
}

// insert is the runs stream's INSERT record of runID, as the executor gets it.
func (s *rtStack) insert(t *testing.T, runID string) stream.StreamRecord {
	t.Helper()
	out, err := s.e.Client().GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(s.runsTable),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: runID}}, ConsistentRead: aws.Bool(true)})
	must(t, err)
	if len(out.Item) == 0 {
		t.Fatalf("run %s not in the table", runID)
	}
	return stream.StreamRecord{EventID: "ev-" + runID, EventName: "INSERT", Keys: map[string]types.AttributeValue{"pk": out.Item["pk"]}, NewImage: out.Item}
}

func rtKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "rt-" + hex.EncodeToString(b)
}

// receiver is a webhook provider that honours Idempotency-Key: the first
// request under a key performs the effect; any later one under the same key
// gets the same answer and performs nothing.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	effects  map[string]int // key -> effects performed (must stay 1)
	noKey    int
	// hold, if set, is called after the effect is performed and before the
	// answer (to stall an executor mid-fire).
	hold func(r *http.Request)
}

func newReceiver(t *testing.T) *receiver {
	rv := &receiver{effects: map[string]int{}}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		k := r.Header.Get("Idempotency-Key")
		rv.mu.Lock()
		rv.requests++
		first := false
		if k == "" {
			rv.noKey++
		} else if _, seen := rv.effects[k]; !seen {
			rv.effects[k] = 1
			first = true
		}
		hold := rv.hold
		rv.mu.Unlock()
		if first && hold != nil {
			hold(r)
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rv.Close)
	return rv
}

func (rv *receiver) stats() (requests, effects int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	for _, n := range rv.effects {
		effects += n
	}
	return rv.requests, effects + rv.noKey
}

func webhookBody(url string, order int) string {
	return fmt.Sprintf(`{"workflowId":"webhook","inputs":{"url":%q,"payload":{"order":%d}}}`, url+"/hook", order)
}

// stackModes are the createRun write paths: one transaction with the
// completion record (moto), and the conditional PutItem fallback (no
// transactions: dynalite, or RUNS_TRANSACTIONAL=false).
func stackModes(t *testing.T, fn func(t *testing.T, s *rtStack)) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		if e.Caps.Transactions {
			t.Run("transactional", func(t *testing.T) { fn(t, newRTStack(t, e, true)) })
		}
		t.Run("put-fallback", func(t *testing.T) { fn(t, newRTStack(t, e, false)) })
	})
}

// TestRedTeamStaleCreateRun: a createRun whose lease was reclaimed while it
// stalled (injected clock) resumes after the new owner completed: its run
// write must not produce a second run, and the record keeps the new owner's
// response.
func TestRedTeamStaleCreateRun(t *testing.T) {
	stackModes(t, func(t *testing.T, s *rtStack) {
		entered, release := make(chan struct{}), make(chan struct{})
		var blocked atomic.Bool
		hold := func(ctx context.Context, d time.Duration) error {
			if blocked.CompareAndSwap(false, true) {
				close(entered)
				<-release
			}
			return nil
		}
		s.sleep.Store(&hold)
		key := rtKey()
		body := `{"workflowId":"conformance-delay","inputs":{"delayMs":1}}`
		var a events.APIGatewayV2HTTPResponse
		var am map[string]any
		done := make(chan struct{})
		go func() { defer close(done); a, am = s.post(t, "acme", key, body) }()
		<-entered
		s.clock.Add(s.guardLease + time.Second) // the stalled owner's lease is over
		b, bm := s.post(t, "acme", key, body)
		close(release)
		<-done
		if b.StatusCode != 201 || header.First(b.Headers, "OpenWOP-Idempotent-Replay") != "" {
			t.Fatalf("the reclaiming request: %d %s", b.StatusCode, b.Body)
		}
		// The stale owner must not claim success for another run.
		if a.StatusCode == 201 && am["runId"] != bm["runId"] {
			t.Fatalf("stale owner answered 201 for run %v, the record names %v", am["runId"], bm["runId"])
		}
		if a.StatusCode != 201 && !(a.StatusCode == 409 && am["error"] == "idempotency_in_flight") {
			t.Fatalf("stale owner: %d %s", a.StatusCode, a.Body)
		}
		if n := len(s.runItems(t)); n != 1 {
			t.Fatalf("%d runs for one key (stale owner's write survived)", n)
		}
		c, cm := s.post(t, "acme", key, body)
		if c.StatusCode != 201 || cm["runId"] != bm["runId"] || header.First(c.Headers, "OpenWOP-Idempotent-Replay") != "true" {
			t.Fatalf("replay after the race: %d %s (want the new owner's %v)", c.StatusCode, c.Body, bm["runId"])
		}
	})
}

// rtFault is one injected DynamoDB failure on the createRun path.
type rtFault struct {
	name string
	// arm schedules the fault; it reports false when the scenario does not
	// apply to this write path.
	arm func(s *rtStack) bool
}

// completionOp is the operation that records the outcome (and, when
// transactional, writes the run), after passing the claim when both are the
// same operation: without a transaction the completion is the request's
// second PutItem on the Layer-1 client, the claim its first. Call it once
// per request, right before scheduling the completion's fault.
func (s *rtStack) completionOp() string {
	if s.transactional {
		return "TransactWriteItems"
	}
	s.faults.PassNext("PutItem", 1)
	return "PutItem"
}

var rtFaults = []rtFault{
	{"claim throttled past the SDK's retries", func(s *rtStack) bool {
		s.faults.FailNext("PutItem", 3, dynamotest.Throttle())
		return true
	}},
	{"claim 500", func(s *rtStack) bool { s.faults.FailNext("PutItem", 1, dynamotest.InternalServerError()); return true }},
	{"claim applied, response lost", func(s *rtStack) bool {
		s.faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		return true
	}},
	{"completion applied, response lost", func(s *rtStack) bool {
		s.faults.FailNextAfterSend(s.completionOp(), 1, dynamotest.ResponseLost())
		return true
	}},
	{"completion applied, every response lost", func(s *rtStack) bool {
		s.faults.FailNextAfterSend(s.completionOp(), 3, dynamotest.ResponseLost())
		return true
	}},
	{"completion 500", func(s *rtStack) bool {
		s.faults.FailNext(s.completionOp(), 1, dynamotest.InternalServerError())
		return true
	}},
	{"completion throttled past the SDK's retries", func(s *rtStack) bool {
		s.faults.FailNext(s.completionOp(), 3, dynamotest.Throttle())
		return true
	}},
	{"completion 500 then release 500", func(s *rtStack) bool {
		s.faults.FailNext(s.completionOp(), 1, dynamotest.InternalServerError())
		s.faults.FailNext("UpdateItem", 1, dynamotest.InternalServerError())
		return true
	}},
	{"run write applied, response lost", func(s *rtStack) bool {
		if s.transactional {
			return false
		}
		s.runFaults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		return true
	}},
	{"run write applied, every response lost", func(s *rtStack) bool {
		if s.transactional {
			return false
		}
		s.runFaults.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
		return true
	}},
	{"run write 500", func(s *rtStack) bool {
		if s.transactional {
			return false
		}
		s.runFaults.FailNext("PutItem", 1, dynamotest.InternalServerError())
		return true
	}},
}

// TestRedTeamCreateRunFaults: injected DynamoDB faults on createRun through
// the real Guard + dynamostore + runs store: however the client retries
// (same key, same body) until it gets a 201, exactly one run exists for the
// key and every 201 names it.
func TestRedTeamCreateRunFaults(t *testing.T) {
	stackModes(t, func(t *testing.T, s *rtStack) {
		want := 0
		for _, f := range rtFaults {
			t.Run(f.name, func(t *testing.T) {
				if !f.arm(s) {
					return
				}
				fired := s.faults.Fired() + s.runFaults.Fired()
				key := rtKey()
				body := `{"workflowId":"conformance-noop","inputs":{"n":1}}`
				r, m := s.post(t, "acme", key, body)
				if s.faults.Fired()+s.runFaults.Fired() == fired {
					t.Fatalf("the fault never fired (%d %s)", r.StatusCode, r.Body)
				}
				s.faults.Clear()
				s.runFaults.Clear()
				want++
				ids := map[any]bool{}
				if r.StatusCode == 201 {
					ids[m["runId"]] = true
				}
				// The client's retries: same key, same body, until a replay.
				for i := 0; ; i++ {
					if i > 6 {
						t.Fatalf("no replay after %d retries: %d %s", i, r.StatusCode, r.Body)
					}
					r, m = s.post(t, "acme", key, body)
					switch {
					case r.StatusCode == 201:
						ids[m["runId"]] = true
					case r.StatusCode == 409 && m["error"] == "idempotency_in_flight":
						s.clock.Add(s.guardLease + time.Second) // the owner died: wait out its lease
					case r.StatusCode >= 500:
					default:
						t.Fatalf("retry %d: %d %s", i, r.StatusCode, r.Body)
					}
					if r.StatusCode == 201 && header.First(r.Headers, "OpenWOP-Idempotent-Replay") == "true" {
						break
					}
				}
				if len(ids) != 1 {
					t.Fatalf("201s named %d runs %v for one key", len(ids), ids)
				}
				if n := len(s.runItems(t)); n != want {
					t.Fatalf("%d runs after %d keys", n, want)
				}
			})
		}
	})
}

// putsBeforeOutcome is how many ledger PutItems a first effect makes before
// its outcome: the executors here have no Fencer, so the claim, written in
// state firing, is also the fire mark (claim, outcome).
const putsBeforeOutcome = 1

// crashAPI is an effects-table client that "crashes" (fails every later
// call, sending nothing) after n PutItems: an executor killed between two
// ledger writes.
type crashAPI struct {
	ledgerdynamo.API
	mu   sync.Mutex
	puts int
	n    int
}

var errCrashed = errors.New("executor crashed")

func (c *crashAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.mu.Lock()
	c.puts++
	dead := c.puts > c.n
	c.mu.Unlock()
	if dead {
		return nil, errCrashed
	}
	return c.API.PutItem(ctx, in, o...)
}

func (c *crashAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.mu.Lock()
	dead := c.puts > c.n
	c.mu.Unlock()
	if dead {
		return nil, errCrashed
	}
	return c.API.GetItem(ctx, in, o...)
}

// handleAll runs HandleRecords of each executor concurrently.
func handleAll(ctx context.Context, xs []*execfn.Executor, recs []stream.StreamRecord) {
	var wg sync.WaitGroup
	for _, x := range xs {
		wg.Add(1)
		go func() { defer wg.Done(); x.HandleRecords(ctx, recs) }()
	}
	wg.Wait()
}

func (s *rtStack) executors(t *testing.T, n int) []*execfn.Executor {
	xs := make([]*execfn.Executor, n)
	for i := range xs {
		xs[i] = s.newExecutor(t, s.e.Client())
	}
	return xs
}

// checkOneEffect asserts the provider performed one effect for runID, the
// witness shows want attempt states in order, and the run completed once.
func checkOneEffect(t *testing.T, s *rtStack, rv *receiver, runID string, want ...ledger.AttemptState) {
	t.Helper()
	if _, effects := rv.stats(); effects != 1 {
		t.Fatalf("the provider performed %d effects: %v", effects, rv.effects)
	}
	r, err := s.runs.Get(context.Background(), runID)
	must(t, err)
	if r.Status != runs.StatusCompleted {
		t.Fatalf("run %s: %s (%s)", runID, r.Status, r.LastError)
	}
	p, err := s.newLedger(t, s.e.Client()).Witness(context.Background(), runID)
	must(t, err)
	var got []ledger.AttemptState
	ids := map[string]bool{}
	for _, row := range p.Effects {
		got = append(got, row.State)
		ids[row.EffectID] = true
	}
	if len(ids) != 1 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("witness %+v: want one effect with attempts %v", p.Effects, want)
	}
	if n := s.log.count("executor: run finished"); n != 1 {
		t.Fatalf("the run was finished %d times", n)
	}
}

// TestRedTeamExecutorDuplicates: the executor under duplicate stream
// deliveries, batch retries and crashed instances, with shared stores on
// moto: the provider (honouring Idempotency-Key) performs one effect, the
// witness shows every attempt, the run ends completed once.
func TestRedTeamExecutorDuplicates(t *testing.T) {
	dynamotest.ForEach(t, testExecutorDuplicates)
}

func testExecutorDuplicates(t *testing.T, e *dynamotest.Emulator) {

	t.Run("concurrent duplicate deliveries and a batch retry", func(t *testing.T) {
		s := newRTStack(t, e, e.Caps.Transactions)
		rv := newReceiver(t)
		_, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, 1))
		id := m["runId"].(string)
		rec := s.insert(t, id)
		handleAll(context.Background(), s.executors(t, 8), []stream.StreamRecord{rec})
		// The event source mapping retries a whole batch holding the record.
		handleAll(context.Background(), s.executors(t, 2), []stream.StreamRecord{rec, rec})
		checkOneEffect(t, s, rv, id, ledger.AttemptCompleted)
		if req, _ := rv.stats(); req != 1 {
			t.Fatalf("%d provider requests, want 1", req)
		}
	})

	t.Run("executor crashed between fire mark and outcome", func(t *testing.T) {
		s := newRTStack(t, e, e.Caps.Transactions)
		rv := newReceiver(t)
		_, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, 2))
		id := m["runId"].(string)
		rec := s.insert(t, id)
		// The claim (the fire mark: no Fencer) reaches the table, the
		// provider is called, then the instance dies before recording the
		// outcome.
		crashed := s.newExecutor(t, &crashAPI{API: e.Client(), n: putsBeforeOutcome})
		if retry := crashed.HandleRecords(context.Background(), []stream.StreamRecord{rec}); len(retry) == 0 {
			t.Fatal("the crashed executor reported success")
		}
		// Redeliveries while its lease is live: in flight, nothing fires.
		handleAll(context.Background(), s.executors(t, 4), []stream.StreamRecord{rec})
		if req, _ := rv.stats(); req != 1 {
			t.Fatalf("%d provider requests while the lease was live", req)
		}
		// The lease runs out; redeliveries race to reclaim.
		s.clock.Add(rtLease + time.Second)
		handleAll(context.Background(), s.executors(t, 6), []stream.StreamRecord{rec})
		handleAll(context.Background(), s.executors(t, 1), []stream.StreamRecord{rec, rec})
		checkOneEffect(t, s, rv, id, ledger.AttemptEscaped, ledger.AttemptCompleted)
		if req, _ := rv.stats(); req != 2 {
			t.Fatalf("%d provider requests, want 2 (one per attempt)", req)
		}
	})

	t.Run("executor context cancelled mid-fire", func(t *testing.T) {
		s := newRTStack(t, e, e.Caps.Transactions)
		rv := newReceiver(t)
		ctx, cancel := context.WithCancel(context.Background())
		// The answer is held until the executor, its context cancelled,
		// has given up the request (a 50 ms sleep here assumed it would
		// within that time; a loaded machine can take longer, and the
		// answer then reached the executor as a success).
		rv.hold = func(r *http.Request) {
			cancel()
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Minute): // a hang guard
			}
		}
		_, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, 3))
		id := m["runId"].(string)
		rec := s.insert(t, id)
		if retry := s.newExecutor(t, e.Client()).HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) == 0 {
			t.Fatal("the cancelled executor reported success")
		}
		rv.mu.Lock()
		rv.hold = nil
		rv.mu.Unlock()
		handleAll(context.Background(), s.executors(t, 6), []stream.StreamRecord{rec})
		checkOneEffect(t, s, rv, id, ledger.AttemptEscaped, ledger.AttemptCompleted)
	})
}

// TestRedTeamStaleExecutor: an executor stalls mid-fire, its claim expires
// (injected clock) and another executor reclaims and completes; when the
// stalled one resumes, its outcome write is rejected and the record keeps
// the new owner's outcome.
func TestRedTeamStaleExecutor(t *testing.T) {
	dynamotest.ForEach(t, testStaleExecutor)
}

func testStaleExecutor(t *testing.T, e *dynamotest.Emulator) {
	s := newRTStack(t, e, e.Caps.Transactions)
	rv := newReceiver(t)
	entered, release := make(chan struct{}), make(chan struct{})
	rv.hold = func(*http.Request) { close(entered); <-release }
	_, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, 4))
	id := m["runId"].(string)
	rec := s.insert(t, id)
	staleDone := make(chan []string)
	stale := s.newExecutor(t, e.Client())
	go func() { staleDone <- stale.HandleRecords(context.Background(), []stream.StreamRecord{rec}) }()
	<-entered
	rv.mu.Lock()
	rv.hold = nil
	rv.mu.Unlock()
	s.clock.Add(rtLease + time.Second)
	if retry := s.newExecutor(t, e.Client()).HandleRecords(context.Background(), []stream.StreamRecord{rec}); len(retry) != 0 {
		t.Fatalf("the reclaiming executor: retry %v", retry)
	}
	l := s.newLedger(t, e.Client())
	id0, err := webhook.WebhookIdentity(mustRun(t, s, id))
	must(t, err)
	before, err := l.Lookup(context.Background(), id0.EffectID)
	must(t, err)
	close(release)
	if retry := <-staleDone; len(retry) != 0 {
		t.Logf("stale executor asked for a retry (fine): %v", retry)
	}
	after, err := l.Lookup(context.Background(), id0.EffectID)
	must(t, err)
	if after.Owner != before.Owner || after.State != ledger.StateCompleted || after.Attempt != 2 || !after.Outcome.OK {
		t.Fatalf("record after the stale executor resumed: owner %s (was %s) state %s attempt %d", after.Owner, before.Owner, after.State, after.Attempt)
	}
	checkOneEffect(t, s, rv, id, ledger.AttemptEscaped, ledger.AttemptCompleted)
}

func mustRun(t *testing.T, s *rtStack, id string) runs.Run {
	t.Helper()
	r, err := s.runs.Get(context.Background(), id)
	must(t, err)
	return r
}

// TestRedTeamComposition: Layer 1 + Layer 2. A retried createRun of a
// webhook workflow never triggers a second delivery, even when the retry
// re-executes createRun (its completion was lost); a new key for the same
// business event fires once when the effect is keyed on its business
// identity.
func TestRedTeamComposition(t *testing.T) {
	stackModes(t, func(t *testing.T, s *rtStack) {
		rv := newReceiver(t)
		deliver := func(recs ...stream.StreamRecord) {
			handleAll(context.Background(), s.executors(t, 3), recs)
		}

		// A plain replay.
		key := rtKey()
		body := webhookBody(rv.URL, 5)
		_, m1 := s.post(t, "acme", key, body)
		deliver(s.insert(t, m1["runId"].(string)))
		r2, m2 := s.post(t, "acme", key, body)
		if r2.StatusCode != 201 || m2["runId"] != m1["runId"] {
			t.Fatalf("replay: %d %s", r2.StatusCode, r2.Body)
		}
		deliver(s.insert(t, m2["runId"].(string)))

		// A retry that re-executes createRun: the first completion is lost
		// (not applied), and so is its release.
		key = rtKey()
		body = webhookBody(rv.URL, 6)
		s.faults.FailNext(s.completionOp(), 1, dynamotest.InternalServerError())
		s.faults.FailNext("UpdateItem", 1, dynamotest.InternalServerError())
		r, m := s.post(t, "acme", key, body)
		s.faults.Clear()
		if r.StatusCode == 201 {
			deliver(s.insert(t, m["runId"].(string))) // its INSERT reaches the executor
		}
		s.clock.Add(s.guardLease + time.Second)
		for i := 0; r.StatusCode != 201 || header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "true"; i++ {
			if i > 4 {
				t.Fatalf("no replay: %d %s", r.StatusCode, r.Body)
			}
			if r, m = s.post(t, "acme", key, body); r.StatusCode == 201 {
				deliver(s.insert(t, m["runId"].(string)))
			}
		}
		if req, effects := rv.stats(); effects != 2 || req != 2 {
			t.Fatalf("two business requests made %d effects (%d provider requests), want 2", effects, req)
		}
		if n := len(s.runItems(t)); n != 2 {
			t.Fatalf("%d runs for two keys", n)
		}

		// Two keys, one business event (order 7), keyed on its business
		// identity: two runs, one effect.
		var fired atomic.Int32
		for _, k := range []string{rtKey(), rtKey()} {
			_, m := s.post(t, "acme", k, `{"workflowId":"conformance-noop","inputs":{"order":7}}`)
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "order.confirm", Key: "order-7"})
			must(t, err)
			l := s.newLedger(t, s.e.Client())
			_, err = l.Do(context.Background(), ledger.Effect{Identity: id, RunID: m["runId"].(string), NodeID: "confirm"},
				func(context.Context, ledger.Call) ([]byte, error) { fired.Add(1); return nil, nil })
			must(t, err)
		}
		if fired.Load() != 1 {
			t.Fatalf("one business event fired %d times", fired.Load())
		}
	})
}

// rtDev is an `idemkit dev` on the test's moto, with its own tables (so the
// test can count runs in the runs table) and two tenants' API keys.
type rtDev struct {
	url       string
	runsTable string
	e         *dynamotest.Emulator
}

const (
	rtKeyA = "idk_rt_tenant_a_0123456789abcdef"
	rtKeyB = "idk_rt_tenant_b_0123456789abcdef"
)

func startRTDev(t *testing.T, e *dynamotest.Emulator) *rtDev {
	t.Helper()
	bin := buildHost(t, t.TempDir(), "idemkit", "cmd/idemkit")
	addr := testutil.FreeAddr(t)
	prefix := "rt" + rtKey()[3:11] + "-"
	// --request-timeout: these attacks are about concurrency, not store
	// deadlines (TestIdemkitDevSurvivesItsStore covers those); 64 requests
	// at once on a loaded machine may outlast the 15 s default.
	p := start(t, os.Environ(), bin, "dev", "--addr", addr, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--request-timeout", "2m",
		"--allow-loopback-webhooks", "--api-key", rtKeyA+"=rt-a", "--api-key", rtKeyB+"=rt-b")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testutil.WaitHTTP(ctx, "http://"+addr+"/.well-known/openwop", p.Done()); err != nil {
		t.Fatalf("idemkit dev not ready: %v\n%s", err, p.Log.String())
	}
	return &rtDev{url: "http://" + addr, runsTable: prefix + "RunsTable", e: e}
}

type rtAnswer struct {
	status  int
	body    string
	replay  bool
	code    any
	retryAt string
}

// post sends one POST /runs as a caller does: a 503
// idemkit.store_unavailable (nothing recorded; the engine answered too
// slowly, as a loaded machine's can) is sent again after its Retry-After,
// up to 10 times, so the answer kept is the one the caller ends with.
func (d *rtDev) post(t *testing.T, apiKey, key, body string) rtAnswer {
	var a rtAnswer
	for range 10 {
		if a = d.postOnce(t, apiKey, key, body); a.status != http.StatusServiceUnavailable || a.code != "idemkit.store_unavailable" || a.retryAt == "" {
			return a
		}
		secs, _ := strconv.Atoi(a.retryAt)
		time.Sleep(time.Duration(max(secs, 1)) * time.Second)
	}
	return a
}

func (d *rtDev) postOnce(t *testing.T, apiKey, key, body string) rtAnswer {
	req, err := http.NewRequest("POST", d.url+"/runs", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return rtAnswer{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return rtAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return rtAnswer{status: resp.StatusCode, body: string(b), replay: resp.Header.Get("OpenWOP-Idempotent-Replay") == "true",
		code: m["error"], retryAt: resp.Header.Get("Retry-After")}
}

// runsOf counts the runs of tenant in the dev server's runs table.
func (d *rtDev) runsOf(t *testing.T, tenant string) int {
	t.Helper()
	n := 0
	p := dynamodb.NewScanPaginator(d.e.Client(), &dynamodb.ScanInput{TableName: aws.String(d.runsTable), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		must(t, err)
		for _, it := range page.Items {
			if v, ok := it["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(v.Value, tenant+"/") {
				n++
			}
		}
	}
	return n
}

func concurrently(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); <-start; fn(i) }()
	}
	close(start)
	wg.Wait()
}

// TestRedTeamDev attacks Layer 1 through `idemkit dev` over HTTP, on every
// engine with streams (the executor needs them).
func TestRedTeamDev(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, testRedTeamDev)
}

func testRedTeamDev(t *testing.T, e *dynamotest.Emulator) {
	d := startRTDev(t, e)

	// 64 concurrent identical POST /runs with one key: one run; every answer
	// is the same 201 body (all but one marked as replays), or 409
	// idempotency_in_flight with Retry-After.
	key := rtKey()
	body := `{"workflowId":"conformance-noop","inputs":{"n":1}}`
	answers := make([]rtAnswer, 64)
	concurrently(len(answers), func(i int) { answers[i] = d.post(t, rtKeyA, key, body) })
	bodies, firsts := map[string]int{}, 0
	for _, a := range answers {
		switch {
		case a.status == 201:
			bodies[a.body]++
			if !a.replay {
				firsts++
			}
		case a.status == 409 && a.code == "idempotency_in_flight" && a.retryAt != "":
		default:
			t.Fatalf("answer %d %s (Retry-After %q)", a.status, a.body, a.retryAt)
		}
	}
	if len(bodies) != 1 || firsts != 1 {
		t.Fatalf("%d distinct 201 bodies, %d unmarked: %v", len(bodies), firsts, bodies)
	}
	if n := d.runsOf(t, "rt-a"); n != 1 {
		t.Fatalf("%d runs for one key", n)
	}

	// The same key, 32 different bodies at once: one run, the others 409
	// idempotency_key_mismatch (never the winner's body).
	key = rtKey()
	concurrently(32, func(i int) {
		answers[i] = d.post(t, rtKeyA, key, fmt.Sprintf(`{"workflowId":"conformance-noop","inputs":{"n":%d}}`, i))
	})
	created := 0
	for _, a := range answers[:32] {
		switch {
		case a.status == 201 && !a.replay:
			created++
		case a.status == 409 && a.code == "idempotency_key_mismatch" && !strings.Contains(a.body, "runId"):
		default:
			t.Fatalf("answer %d %s", a.status, a.body)
		}
	}
	if created != 1 {
		t.Fatalf("%d runs created from one key", created)
	}
	if n := d.runsOf(t, "rt-a"); n != 2 {
		t.Fatalf("%d runs after two keys", n)
	}

	// The same key in two tenants, concurrently: two runs, neither a replay.
	key = rtKey()
	concurrently(16, func(i int) {
		k := rtKeyA
		if i%2 == 1 {
			k = rtKeyB
		}
		answers[i] = d.post(t, k, key, body)
	})
	ids := map[string]bool{}
	for i, a := range answers[:16] {
		if a.status != 201 {
			t.Fatalf("answer %d %s", a.status, a.body)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(a.body), &m)
		id, _ := m["runId"].(string)
		want := "rt-a/"
		if i%2 == 1 {
			want = "rt-b/"
		}
		if !strings.HasPrefix(id, want) {
			t.Fatalf("tenant %s got run %q", want, id)
		}
		ids[id] = true
	}
	if len(ids) != 2 || d.runsOf(t, "rt-a") != 3 || d.runsOf(t, "rt-b") != 1 {
		t.Fatalf("runs %v; tenant a %d, tenant b %d", ids, d.runsOf(t, "rt-a"), d.runsOf(t, "rt-b"))
	}
}

// faultAPI injects one fault into the n-th PutItem an executor's ledger
// makes (1: claim, written firing: no Fencer, so it is also the fire mark;
// 2: outcome), below the SDK's retries: lost (the write is applied, the
// caller gets an error) or refused (not sent).
type faultAPI struct {
	ledgerdynamo.API
	mu   sync.Mutex
	puts int
	at   int
	lost bool
}

var errInjected = errors.New("injected DynamoDB failure")

func (f *faultAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.mu.Lock()
	f.puts++
	hit := f.puts == f.at
	f.mu.Unlock()
	if !hit {
		return f.API.PutItem(ctx, in, o...)
	}
	if f.lost {
		_, _ = f.API.PutItem(ctx, in, o...)
	}
	return nil, errInjected
}

// TestRedTeamExecutorFaults: a DynamoDB failure at each ledger write of the
// webhook effect (claim, outcome), applied-but-lost or refused,
// then stream redeliveries (with the lease run out when one is held): the
// provider performs exactly one effect and the run succeeds.
func TestRedTeamExecutorFaults(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newRTStack(t, e, e.Caps.Transactions)
		order := 100
		for at := 1; at <= putsBeforeOutcome+1; at++ {
			for _, lost := range []bool{true, false} {
				t.Run(fmt.Sprintf("put %d lost=%t", at, lost), func(t *testing.T) {
					rv := newReceiver(t)
					order++
					_, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, order))
					id := m["runId"].(string)
					rec := s.insert(t, id)
					fa := &faultAPI{API: e.Client(), at: at, lost: lost}
					s.newExecutor(t, fa).HandleRecords(context.Background(), []stream.StreamRecord{rec})
					fa.mu.Lock()
					puts := fa.puts
					fa.mu.Unlock()
					if puts < at {
						t.Fatalf("the fault never fired: %d PutItems", puts)
					}
					for i := 0; mustRun(t, s, id).Status != runs.StatusCompleted; i++ {
						if i > 3 {
							t.Fatalf("run %s: %+v", id, mustRun(t, s, id))
						}
						s.clock.Add(rtLease + time.Second)
						handleAll(context.Background(), s.executors(t, 3), []stream.StreamRecord{rec})
					}
					if _, effects := rv.stats(); effects != 1 {
						t.Fatalf("%d effects", effects)
					}
				})
			}
		}
	})
}

// TestRedTeamGiveUpWhileInFlight: an executor crashes mid-fire (the
// provider performed the effect) and the stream's tries (MaxAttempts) run
// out while its lease is live. The last try must not fail the run: it waits
// the lease out (injected sleeper advancing the clock, no real wait),
// executes once more, reclaims (the stalled attempt becomes escaped) and
// sends the same provider key, which the provider deduplicates: the run
// ends completed, one effect, witness escaped then completed. When the lease
// cannot end within the deadline the run is failed, and its witness shows
// the fired attempt escaped once the lease is over.
func TestRedTeamGiveUpWhileInFlight(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s := newRTStack(t, e, e.Caps.Transactions)
		rv := newReceiver(t)
		_, m := s.post(t, "acme", rtKey(), webhookBody(rv.URL, 900))
		id := m["runId"].(string)
		rec := s.insert(t, id)
		var waits atomic.Int32
		lastTry := func(x *execfn.Executor) *execfn.Executor {
			x.MaxAttempts = 3
			x.Test.Clock = ledgertest.ClockFuncs{NowFunc: s.clock.Now, SleepFunc: func(_ context.Context, d time.Duration) error { waits.Add(1); s.clock.Add(d); return nil }}
			return x
		}
		crashed := lastTry(s.newExecutor(t, &crashAPI{API: e.Client(), n: putsBeforeOutcome}))
		crashed.HandleRecords(context.Background(), []stream.StreamRecord{rec})
		if req, _ := rv.stats(); req != 1 {
			t.Fatalf("the crashed executor made %d provider requests", req)
		}
		for try := 2; try <= 3; try++ {
			retry := lastTry(s.newExecutor(t, e.Client())).HandleRecords(context.Background(), []stream.StreamRecord{rec})
			if try < 3 && len(retry) != 1 {
				t.Fatalf("try %d inside the lease: retry %v", try, retry)
			}
			if try == 3 && len(retry) != 0 {
				t.Fatalf("last try: retry %v", retry)
			}
		}
		if waits.Load() != 1 {
			t.Fatalf("the last try waited %d times", waits.Load())
		}
		if r := mustRun(t, s, id); r.Failures != 3 {
			t.Fatalf("failures %d (%s)", r.Failures, r.LastError)
		}
		checkOneEffect(t, s, rv, id, ledger.AttemptEscaped, ledger.AttemptCompleted)
		if req, _ := rv.stats(); req != 2 {
			t.Fatalf("%d provider requests, want 2 (the crashed attempt and its reclaim, one key)", req)
		}
		s.clock.Add(rtLease + time.Second)
		handleAll(context.Background(), s.executors(t, 2), []stream.StreamRecord{rec}) // ended runs are dropped
		checkOneEffect(t, s, rv, id, ledger.AttemptEscaped, ledger.AttemptCompleted)

		// When the lease cannot end within the last try's deadline the run
		// is given up (nothing fires twice), and once the lease is over the
		// witness calls the fired attempt escaped, never "claimed" forever.
		_, m = s.post(t, "acme", rtKey(), webhookBody(rv.URL, 901))
		id = m["runId"].(string)
		rec = s.insert(t, id)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		lastTry(s.newExecutor(t, &crashAPI{API: e.Client(), n: putsBeforeOutcome})).HandleRecords(ctx, []stream.StreamRecord{rec})
		for i := 0; i < 2; i++ {
			lastTry(s.newExecutor(t, e.Client())).HandleRecords(ctx, []stream.StreamRecord{rec})
		}
		if r := mustRun(t, s, id); r.Status != runs.StatusFailed || waits.Load() != 1 {
			t.Fatalf("run %s (%s), %d waits", r.Status, r.Error, waits.Load())
		}
		s.clock.Add(rtLease + time.Second)
		handleAll(context.Background(), s.executors(t, 2), []stream.StreamRecord{rec})
		if req, effects := rv.stats(); req != 3 || effects != 2 {
			t.Fatalf("%d provider requests, %d effects (two runs)", req, effects)
		}
		p, err := s.newLedger(t, e.Client()).Witness(context.Background(), id)
		must(t, err)
		if len(p.Effects) != 1 || p.Effects[0].State != ledger.AttemptEscaped {
			t.Fatalf("witness %+v: want the fired attempt escaped", p.Effects)
		}
	})
}

// TestRedTeamBusinessKey: the reference webhook workflow keyed on a
// business identity (inputs.businessKey). Two createRun calls with two
// Idempotency-Keys for one business event are two runs, but one effect:
// their INSERTs, delivered concurrently and redelivered, make one provider
// request; both runs end completed; the effect's keying is
// business-identity. Without ledger.Config.WitnessDuplicates (the kit's
// default), exactly one run's witness lists the effect (the one whose
// executor made the attempt); the other's Do was a suppressed duplicate and
// its witness is empty.
func TestRedTeamBusinessKey(t *testing.T) {
	stackModes(t, func(t *testing.T, s *rtStack) {
		rv := newReceiver(t)
		body := fmt.Sprintf(`{"workflowId":"webhook","inputs":{"url":%q,"payload":{"order":77},"businessKey":"order-77/confirm"}}`, rv.URL+"/hook")
		var ids []string
		var recs []stream.StreamRecord
		for _, k := range []string{rtKey(), rtKey()} {
			r, m := s.post(t, "acme", k, body)
			if r.StatusCode != 201 || header.First(r.Headers, "OpenWOP-Idempotent-Replay") == "true" {
				t.Fatalf("createRun: %d %s", r.StatusCode, r.Body)
			}
			ids = append(ids, m["runId"].(string))
			recs = append(recs, s.insert(t, m["runId"].(string)))
		}
		if ids[0] == ids[1] {
			t.Fatal("two keys named one run")
		}
		var wg sync.WaitGroup
		for _, rec := range recs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				handleAll(context.Background(), s.executors(t, 3), []stream.StreamRecord{rec})
			}()
		}
		wg.Wait()
		handleAll(context.Background(), s.executors(t, 2), recs) // a batch retry holding both
		if req, effects := rv.stats(); req != 1 || effects != 1 {
			t.Fatalf("one business event: %d provider requests, %d effects", req, effects)
		}
		want, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: webhook.WebhookOperation, Key: "order-77/confirm"})
		must(t, err)
		rv.mu.Lock()
		n := rv.effects[want.ProviderKey]
		rv.mu.Unlock()
		if n != 1 {
			t.Fatalf("the provider got no request under the business identity's key")
		}
		listed := 0
		for _, id := range ids {
			if r := mustRun(t, s, id); r.Status != runs.StatusCompleted {
				t.Fatalf("run %s: %s (%s)", id, r.Status, r.Error)
			}
			p, err := s.newLedger(t, s.e.Client()).Witness(context.Background(), id)
			must(t, err)
			for _, row := range p.Effects {
				if row.EffectID != want.EffectID || row.Keying != identity.KeyingBusinessIdentity || row.State != ledger.AttemptCompleted {
					t.Fatalf("run %s: witness row %+v", id, row)
				}
			}
			if len(p.Effects) > 1 {
				t.Fatalf("run %s: witness %+v", id, p.Effects)
			}
			listed += len(p.Effects)
		}
		if listed != 1 {
			t.Fatalf("%d witnesses list the effect, want exactly the attempting run's", listed)
		}
	})
}
