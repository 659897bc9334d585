package apifn

// The commerce policy's answer to a duplicate of a run-creating request
// still executing: it names a run only once that run exists. The first
// execution is held after it answered and before its outcome is recorded
// (endHeld), so the duplicate meets a pending record whatever the first
// answer is: a 201 whose run is written, or one that creates no run
// (refused with an outcome the policy forgets, or a failure it keeps).

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// endHeld holds, once armed, the next write that ends an attempt
// (Complete, or Delete for an outcome the policy forgets) until released:
// the first execution has answered and its record is still pending.
type endHeld struct {
	idem.Store
	mu               sync.Mutex
	entered, release chan struct{}
}

// arm holds the next Complete or Delete: entered is closed when it is
// reached, and it goes on once release is closed.
func (s *endHeld) arm() (entered, release chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entered, s.release = make(chan struct{}), make(chan struct{})
	return s.entered, s.release
}

func (s *endHeld) hold() {
	s.mu.Lock()
	entered, release := s.entered, s.release
	s.entered, s.release = nil, nil
	s.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
}

func (s *endHeld) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.hold()
	return s.Store.Complete(ctx, claim, out, now)
}

func (s *endHeld) Delete(ctx context.Context, id, owner string, now time.Time) error {
	s.hold()
	return s.Store.Delete(ctx, id, owner, now)
}

// pendingRunHost is the api handler under the commerce policy (no wait:
// a sync duplicate is answered at once, as an async one) over rs and a
// Layer-1 store held by st; cnt counts the round trips of the emulator's
// client (nil in memory).
type pendingRunHost struct {
	f   *fixture
	rs  runs.RunStore
	st  *endHeld
	cnt *dynamotest.Counter
}

func newPendingRunHost(t *testing.T, rs runs.RunStore, st idem.Store, cnt *dynamotest.Counter) *pendingRunHost {
	held := &endHeld{Store: st}
	return &pendingRunHost{f: hostOf(t, rs, idem.Config{Policy: commerce.Policy, Store: held, Wait: -1}, nil), rs: rs, st: held, cnt: cnt}
}

// seed writes a run of acme in status s.
func (h *pendingRunHost) seed(t *testing.T, s runs.Status) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun("acme", "conformance-noop", []byte(`{"n":1}`), time.Now())
	if err := h.rs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if s != runs.StatusPending {
		var err error
		if r, err = h.rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, s, "boom", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// pendingRunCase is one answer of the first execution, held while a
// duplicate is answered.
type pendingRunCase struct {
	name string
	// req is the request, under its own key (it may write what the case
	// needs first).
	req    func(h *pendingRunHost, t *testing.T) events.APIGatewayV2HTTPRequest
	status int // the first execution's answer (201: it created a run)
	// written: the run is written before the outcome is recorded (its own
	// conditional write), so the duplicate is the pending Action naming it.
	written bool
}

// pendingRunCases: a create and a retry answered 201, and every answer of
// a run-creating route that creates no run under its claim: a create
// refused because another run holds its scope (409 run_already_active,
// forgotten), a create whose runner is unavailable (503, a failed action
// kept), a retry of a run that has not failed (409, kept), a retry of a
// missing run (404, kept). A create refused for its body (400) is
// answered before the claim (RED_TEAM 522): no execution is pending for a
// duplicate to find, and each duplicate is that same 400
// (TestBodyRefusedForItselfIsAnsweredBeforeTheClaim).
var pendingRunCases = []pendingRunCase{
	{name: "created", status: 201, written: true, req: func(_ *pendingRunHost, _ *testing.T) events.APIGatewayV2HTTPRequest {
		return commerceCreate("pending run created", "")
	}},
	{name: "scope held (forgotten)", status: 409, req: func(h *pendingRunHost, t *testing.T) events.APIGatewayV2HTTPRequest {
		holder := commerceReq("POST", "/runs", "pending run scope holder")
		holder.Body = `{"workflowId":"conformance-noop","scopeId":"order-77"}`
		holder.Headers["openwop-dedup"] = "enforce"
		if r, _ := h.f.do(t, holder); r.StatusCode != 201 {
			t.Fatalf("the scope's holder: %d %s", r.StatusCode, r.Body)
		}
		e := commerceReq("POST", "/runs", "pending run scope refused")
		e.Body = holder.Body
		e.Headers["openwop-dedup"] = "enforce"
		return e
	}},
	{name: "503 runner unavailable (kept)", status: 503, req: func(_ *pendingRunHost, _ *testing.T) events.APIGatewayV2HTTPRequest {
		e := commerceReq("POST", "/runs", "pending run unavailable")
		e.Body = `{"workflowId":"conformance-unavailable"}`
		return e
	}},
	{name: "retry of a run not failed (kept)", status: 409, req: func(h *pendingRunHost, t *testing.T) events.APIGatewayV2HTTPRequest {
		r := h.seed(t, runs.StatusRunning)
		return commerceReq("POST", "/runs/"+runs.ProjectID(r.ID)+"/retry", "pending retry not failed")
	}},
	{name: "retry created", status: 201, written: true, req: func(h *pendingRunHost, t *testing.T) events.APIGatewayV2HTTPRequest {
		r := h.seed(t, runs.StatusFailed)
		return commerceReq("POST", "/runs/"+runs.ProjectID(r.ID)+"/retry", "pending retry created")
	}},
	{name: "retry of a missing run (kept)", status: 404, req: func(_ *pendingRunHost, _ *testing.T) events.APIGatewayV2HTTPRequest {
		return commerceReq("POST", "/runs/"+runs.ProjectID(runs.NewRun("acme", "conformance-noop", nil, time.Now()).ID)+"/retry", "pending retry missing")
	}},
}

// withMode is e with Idempotency-Mode mode ("" for none) and a request id
// of its own.
func withMode(e events.APIGatewayV2HTTPRequest, mode string) events.APIGatewayV2HTTPRequest {
	h := make(map[string]string, len(e.Headers)+1)
	for k, v := range e.Headers {
		h[k] = v
	}
	if mode != "" {
		h["idempotency-mode"] = mode
	}
	e.Headers = h
	e.RequestContext.RequestID += "-" + mode + "-dup"
	return e
}

// run drives c: the first execution answers and is held before its outcome
// is recorded; a duplicate in each mode is answered meanwhile; then the
// first finishes and the key is sent once more. Every run any of these
// answers names must exist once the first execution finished. layer1 is
// the round trips of the Layer-1 in-flight answer (0: not counted).
func (h *pendingRunHost) run(t *testing.T, c pendingRunCase, layer1 int) {
	req := c.req(h, t)
	entered, release := h.st.arm()
	firstc := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() {
		r, err := h.f.h.Handle(context.Background(), req)
		if err != nil {
			r = events.APIGatewayV2HTTPResponse{StatusCode: 599, Body: err.Error()}
		}
		firstc <- r
	}()
	<-entered
	type named struct{ by, runID string }
	var names []named
	var firstID string
	for _, mode := range []string{"async", ""} {
		if h.cnt != nil {
			h.cnt.Reset()
		}
		r, m := h.f.do(t, withMode(req, mode))
		if h.cnt != nil && layer1 > 0 {
			// The Layer-1 in-flight answer and one read of the run the key
			// names (runs.ClaimRunID): the pending Action is named only
			// once that read finds it.
			if n, ops := h.cnt.Total(), h.cnt.Ops(); n != layer1+1 {
				t.Errorf("mode %q: the duplicate took %d round trips %v, want %d (the in-flight answer and one read of the run)", mode, n, ops, layer1+1)
			}
		}
		// The pending answer, whatever the first answer is: the commerce
		// policy never answers 409 idempotency_in_flight to a duplicate.
		if r.StatusCode != http.StatusAccepted || r.Headers["Retry-After"] == "" || r.Headers[commerce.HeaderIdempotentReplay] != "true" || m["status"] != "pending" {
			t.Errorf("mode %q, the first execution held: %d %v %s, want 202, the pending answer with Retry-After", mode, r.StatusCode, r.Headers, r.Body)
		}
		id, _ := m["runId"].(string)
		if id != "" {
			names = append(names, named{"the duplicate (mode " + mode + ")", id})
			if su, _ := m["statusUrl"].(string); !strings.HasSuffix(su, "/runs/"+runs.ProjectID(id)) {
				t.Errorf("mode %q: statusUrl %q does not name run %s", mode, su, id)
			}
			// Named only once it exists: it is there now, while the first
			// execution is still held.
			if g, _ := h.f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(id), "")); g.StatusCode != http.StatusOK {
				t.Errorf("mode %q: the duplicate named run %s, which is not written (GET: %d %s)", mode, id, g.StatusCode, g.Body)
			}
		}
		if c.written && id == "" {
			t.Errorf("mode %q: the run was written, the duplicate got %s: want the pending Action naming it", mode, r.Body)
		}
		if firstID == "" {
			firstID = id
		} else if id != firstID {
			t.Errorf("the duplicates named %q and %q", firstID, id)
		}
	}
	close(release)
	r1 := <-firstc
	_, m1 := decodeBody(r1)
	if r1.StatusCode != c.status {
		t.Fatalf("first: %d %s, want %d", r1.StatusCode, r1.Body, c.status)
	}
	if id, _ := m1["runId"].(string); id != "" {
		names = append(names, named{"the first answer", id})
		if firstID != "" && firstID != id {
			t.Errorf("the duplicate named run %s, the first answer %s", firstID, id)
		}
	}
	again, m2 := h.f.do(t, withMode(req, "async"))
	if id, _ := m2["runId"].(string); id != "" {
		names = append(names, named{"the key's next answer", id})
	}
	if (c.status == http.StatusCreated) != (len(names) > 0) {
		t.Errorf("first answer %d, runs named %v (next answer %d %s)", c.status, names, again.StatusCode, again.Body)
	}
	for _, n := range names {
		g, _ := h.f.do(t, commerceReq("GET", "/runs/"+runs.ProjectID(n.runID), ""))
		if g.StatusCode != http.StatusOK {
			t.Errorf("%s named run %s, which does not exist once the first execution finished (GET: %d %s)", n.by, n.runID, g.StatusCode, g.Body)
		}
	}
}

func decodeBody(r events.APIGatewayV2HTTPResponse) (events.APIGatewayV2HTTPResponse, map[string]any) {
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	return r, m
}

// TestCommercePendingActionNamesOnlyARunThatExists: under the commerce
// policy a duplicate of POST /runs or POST /runs/{runId}/retry whose first
// execution is still pending is answered the pending Action naming its run
// only once that run is written (it can then only end, never vanish);
// before, and when the first execution creates no run at all (a create
// refused for a held scope or a bad body, both forgotten; a runner
// unavailable; a retry of a run not failed or missing), the pending answer
// names no run. Every run any answer names exists. In memory and on the
// three engines (the run written by its own conditional write), and on the
// engines with transactions with the run written in the completion
// transaction (not yet written while the first execution is held). The
// in-flight answer costs the Layer-1 answer and one read of the run.
func TestCommercePendingActionNamesOnlyARunThatExists(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		for _, c := range pendingRunCases {
			t.Run(c.name, func(t *testing.T) {
				newPendingRunHost(t, runs.NewMemRuns(), idemmem.New(), nil).run(t, c, 0)
			})
		}
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		layer1 := 1
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			layer1 = 2
		}
		modes := []bool{false}
		if e.Caps.Transactions {
			modes = append(modes, true)
		}
		for _, transactional := range modes {
			name := "put-fallback"
			if transactional {
				name = "transactional"
			}
			t.Run(name, func(t *testing.T) {
				cnt := dynamotest.NewCounter()
				cl := e.Client(dynamotest.FastRetries, cnt.Middleware())
				rs := &runs.DynamoRuns{Client: cl, Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
				st, err := idemdynamo.New(idemdynamo.Config{Client: cl, Table: e.CreateTable(t, "IdempotencyTable")})
				if err != nil {
					t.Fatal(err)
				}
				h := newPendingRunHost(t, rs, st, cnt)
				for _, c := range pendingRunCases {
					if transactional {
						// The run commits with the completion: while the
						// first execution is held it is not written yet.
						c.written = false
					}
					t.Run(c.name, func(t *testing.T) { h.run(t, c, layer1) })
				}
			})
		}
	})
}

// failingGetRuns fails Get while down: the runs table out of reach.
type failingGetRuns struct {
	*runs.MemRuns
	down atomic.Bool
}

func (f *failingGetRuns) Get(ctx context.Context, id string) (runs.Run, error) {
	if f.down.Load() {
		return runs.Run{}, errors.New("runs table unreachable")
	}
	return f.MemRuns.Get(ctx, id)
}

// TestCommercePendingActionRunReadFailedNamesNoRun: when the read of the
// run fails, the duplicate of an executing create is not told a run id it
// could not confirm: it gets the pending answer naming no run (202 with
// Retry-After), even though the run is written; once the read works
// again, the pending Action names it. In memory, and on the three engines
// with the read throttled past the SDK's retries.
func TestCommercePendingActionRunReadFailedNamesNoRun(t *testing.T) {
	check := func(t *testing.T, h *pendingRunHost, fail, heal func()) {
		req := commerceCreate("pending run read failed", "")
		entered, release := h.st.arm()
		firstc := make(chan events.APIGatewayV2HTTPResponse, 1)
		go func() {
			r, _ := h.f.h.Handle(context.Background(), req)
			firstc <- r
		}()
		<-entered
		fail()
		r, m := h.f.do(t, withMode(req, "async"))
		heal()
		if r.StatusCode != http.StatusAccepted || r.Headers["Retry-After"] == "" || m["status"] != "pending" || m["runId"] != nil || m["statusUrl"] != nil {
			t.Errorf("the run's read failed: %d %v %s, want the pending answer naming no run", r.StatusCode, r.Headers, r.Body)
		}
		r, m = h.f.do(t, withMode(req, "async"))
		if r.StatusCode != http.StatusAccepted || m["runId"] == nil {
			t.Errorf("the run's read works again: %d %s, want the pending Action naming the run", r.StatusCode, r.Body)
		}
		close(release)
		if r1 := <-firstc; r1.StatusCode != http.StatusCreated {
			t.Fatalf("first: %d %s", r1.StatusCode, r1.Body)
		}
	}
	t.Run("memory", func(t *testing.T) {
		rs := &failingGetRuns{MemRuns: runs.NewMemRuns()}
		h := newPendingRunHost(t, rs, idemmem.New(), nil)
		check(t, h, func() { rs.down.Store(true) }, func() { rs.down.Store(false) })
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		// The runs table's client alone fails: the Layer-1 claim is
		// answered as usual.
		faults := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		st, err := idemdynamo.New(idemdynamo.Config{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		h := newPendingRunHost(t, rs, st, nil)
		check(t, h, func() { faults.FailNext("GetItem", 3, dynamotest.Throttle()) }, faults.Clear)
	})
}
