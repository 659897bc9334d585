package apifn

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// fillOnRead is a RunStore whose first read of run id is answered as it
// was and then, before the reader goes on, another retry is listed on it
// (LinkRetry of other): a racing retry that filled the failed run's list
// between this request's cap check and its own listing.
type fillOnRead struct {
	runs.RunStore
	id, other string
	once      sync.Once
}

func (s *fillOnRead) Get(ctx context.Context, id string) (runs.Run, error) {
	r, err := s.RunStore.Get(ctx, id)
	if id == s.id {
		s.once.Do(func() {
			if lerr := s.RunStore.LinkRetry(ctx, s.id, s.other); lerr != nil {
				err = lerr
			}
		})
	}
	return r, err
}

// TestRetryRefusedAtTheCapIsNeverWritten: a retry that read its failed
// run one below the cap and whose listing was then refused (a racing retry
// took the last place) is answered 409 CodeRetryLimitReached and writes
// no run: without transactions the run used to be written before the
// listing and cancelled after it, so the executor could take it from the
// runs stream and start its first node in between. Its 409's Layer-1
// completion lost, the key's re-execution (past the lease) is answered the
// same 409, never 201 for the run that earlier write left cancelled; the
// key then replays that 409. On memory and every engine, the run written
// by its own conditional write.
func TestRetryRefusedAtTheCapIsNeverWritten(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		const tenant = "acme"
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now().UTC().Truncate(time.Millisecond))
		failed := failedBelowTheCap(t, rs, tenant, clk.Now())
		gate := &fillOnRead{RunStore: rs, id: failed.ID, other: fmt.Sprintf("%s/%022d", tenant, MaxRunRetries-1)}
		f := hostOf(t, gate, idem.Config{Store: &lostCompletion{Store: inner}, Test: idem.TestConfig{Clock: clk}},
			func(_ *fixture, c *Config) { c.Test.Clock = clk })
		req := ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "k-retry-refused-0123456789abcdef", "")

		refused, m := f.do(t, req)
		if refused.StatusCode != http.StatusConflict || m["error"] != CodeRetryLimitReached {
			t.Fatalf("the retry whose listing was refused: %d %s", refused.StatusCode, refused.Body)
		}
		noUnlistedRetry(t, e, rs, failed.ID)

		// Its completion was lost: past the lease the key runs again.
		clk.Advance(idem.DefaultLease + time.Second)
		again, m := f.do(t, req)
		if again.StatusCode != http.StatusConflict || m["error"] != CodeRetryLimitReached {
			t.Fatalf("the refused key's re-execution, its 409's completion lost: %d %s; want the 409 again", again.StatusCode, again.Body)
		}
		noUnlistedRetry(t, e, rs, failed.ID)
		finalRefusal(t, f, again, req)
		if got, err := rs.Get(ctx, failed.ID); err != nil || len(got.Retries) != MaxRunRetries {
			t.Fatalf("the failed run lists %d retries (%v); want %d", len(got.Retries), err, MaxRunRetries)
		}
	})
}

// noUnlistedRetry fails t when a run retrying failed exists that failed
// does not list, whatever its status: a refused retry writes no run.
func noUnlistedRetry(t *testing.T, e *dynamotest.Emulator, rs runs.RunStore, failed string) {
	t.Helper()
	f, err := rs.Get(context.Background(), failed)
	if err != nil {
		t.Fatal(err)
	}
	if e == nil {
		if n := rs.(*runs.MemRuns).Len(); n != 1 {
			t.Fatalf("the store holds %d runs; want the failed run alone", n)
		}
		return
	}
	for _, r := range retryRunsOf(t, e, rs, failed) {
		if !slices.Contains(f.Retries, r.ID) {
			t.Errorf("run %s retries the failed run, which does not list it; it is %s (%s): a refused retry wrote its run", r.ID, r.Status, r.CancelReason)
		}
	}
}

// TestRetryKeyListedIsAnsweredAtTheCap: a retry whose listing on the
// failed run landed and whose run's write did not (the runs table refused
// it; the key was answered 5xx, retryable) leaves its id listed and no
// run. The list is then at the cap, that id among it: another key is 409
// CodeRetryLimitReached, and the key's retry, its run id the same
// (runs.ClaimRunID), passes the cap, writes its run and is answered 201,
// the list unchanged. Without transactions, on every engine.
func TestRetryKeyListedIsAnsweredAtTheCap(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries)
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		_, st := dynamoStores(t, e, c, false)
		h := &retryCapHost{f: hostOf(t, rs, idem.Config{Store: st}, nil), c: c, rs: rs, tenant: strings.Repeat("t", 128)}
		failed := h.largestFailed(t)
		h.list(t, failed.ID, 0, MaxRunRetries-1)
		faults.FailNext("PutItem", 100, dynamotest.InternalServerError()) // the run's write, through the SDK's retries
		if _, status, m := h.retry(t, failed.ID, "k-retry-unwritten-0123456789ab"); status < 500 {
			t.Fatalf("a retry whose run write failed: %d %v", status, m)
		}
		faults.Clear()
		got, _ := h.rs.Get(context.Background(), failed.ID)
		if len(got.Retries) != MaxRunRetries {
			t.Fatalf("after a listing whose run write failed the run lists %d; want %d", len(got.Retries), MaxRunRetries)
		}
		if _, status, m := h.retry(t, failed.ID, "k-retry-other-0123456789abcd"); status != http.StatusConflict || m["error"] != CodeRetryLimitReached {
			t.Fatalf("another key at the cap: %d %v", status, m)
		}
		ok, status, m := h.retry(t, failed.ID, "k-retry-unwritten-0123456789ab")
		id, _ := m["runId"].(string)
		if !ok || id == "" {
			t.Fatalf("the key whose retry is listed, at the cap: %d %v", status, m)
		}
		if r, err := h.rs.Get(context.Background(), id); err != nil || r.RetryOf != failed.ID || r.Status != runs.StatusPending {
			t.Fatalf("the key's run: %+v %v", r, err)
		}
		got, _ = h.rs.Get(context.Background(), failed.ID)
		if len(got.Retries) != MaxRunRetries || !slices.Contains(got.Retries, id) {
			t.Fatalf("after the key's answer the run lists %d retries (its run listed: %v)", len(got.Retries), slices.Contains(got.Retries, id))
		}
	})
}

// firstAttemptsLost is a Layer-1 store where no first execution's
// completion lands: every key's first invocation dies after its handler
// and before its outcome is recorded.
type firstAttemptsLost struct{ idem.Store }

func (s firstAttemptsLost) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if claim.Attempt <= 1 {
		return fmt.Errorf("the invocation of attempt %d died before its completion was written", claim.Attempt)
	}
	return s.Store.Complete(ctx, claim, out, now)
}

// TestParallelRetriesAtTheCapReexecuted: 16 parallel retries of a failed
// run one below the cap, under distinct keys, every read of it answered
// only once all 16 have read, and no first execution's completion
// recorded; past the lease every key runs again. The one key listed first
// is 201 both times with the same run, every other key 409
// CodeRetryLimitReached both times; the failed run lists exactly the cap
// and no run retrying it is left unlisted, whatever its status. On memory
// and every engine, the run written by its own conditional write.
func TestParallelRetriesAtTheCapReexecuted(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		const tenant, n = "acme", 16
		rs, inner := backendStores(t, e)
		clk := clock.NewManual(time.Now().UTC().Truncate(time.Millisecond))
		gate := &readGate{RunStore: rs, n: n, open: make(chan struct{})}
		f := hostOf(t, gate, idem.Config{Store: firstAttemptsLost{inner}, Test: idem.TestConfig{Clock: clk}},
			func(_ *fixture, c *Config) { c.Test.Clock = clk })
		failed := failedBelowTheCap(t, rs, tenant, clk.Now())
		gate.id = failed.ID
		req := func(i int) events.APIGatewayV2HTTPRequest {
			return ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, fmt.Sprintf("k-race-%02d-0123456789abcdefgh", i), "")
		}
		first := make([]retryAnswer, n)
		var wg sync.WaitGroup
		for i := range first {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := f.h.Handle(ctx, req(i))
				if err != nil {
					t.Errorf("retry %d: %v", i, err)
				}
				first[i] = retryAnswer{r.StatusCode, r.Body}
			}()
		}
		wg.Wait()
		clk.Advance(idem.DefaultLease + time.Second)
		created := 0
		for i := range first {
			r, m := f.do(t, req(i))
			switch {
			case first[i].status == http.StatusCreated:
				created++
				if r.StatusCode != http.StatusCreated || !strings.Contains(first[i].body, fmt.Sprintf("%q", m["runId"])) {
					t.Errorf("key %d, 201 first, again: %d %s; want 201 naming the same run (%s)", i, r.StatusCode, r.Body, first[i].body)
				}
			case first[i].status != http.StatusConflict || r.StatusCode != http.StatusConflict || m["error"] != CodeRetryLimitReached:
				t.Errorf("key %d: %d %s, then %d %s; want 409 %s both times", i, first[i].status, first[i].body, r.StatusCode, r.Body, CodeRetryLimitReached)
			}
		}
		if created != 1 {
			t.Errorf("%d of %d keys were answered 201; want 1", created, n)
		}
		if got, err := rs.Get(ctx, failed.ID); err != nil || len(got.Retries) != MaxRunRetries {
			t.Errorf("the failed run lists %d retries (%v); want %d", len(got.Retries), err, MaxRunRetries)
		}
		if e == nil {
			if n := rs.(*runs.MemRuns).Len(); n != 2 {
				t.Errorf("the store holds %d runs; want the failed run and its one retry", n)
			}
			return
		}
		noUnlistedRetry(t, e, rs, failed.ID)
	})
}

// holdPut is a client option holding the first PutItem sent once armed:
// it is reported on reached and goes on when release is closed.
type holdPut struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	release chan struct{}
}

func (p *holdPut) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("holdPut",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				p.mu.Lock()
				hold := p.armed && middleware.GetOperationName(ctx) == "PutItem"
				if hold {
					p.armed = false
				}
				p.mu.Unlock()
				if hold {
					close(p.reached)
					<-p.release
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	})
}

// TestRetryOvertakenBetweenListingAndWrite: a retry at the cap whose
// execution listed its run id and then stalled before writing the run
// (its lease ran out) is overtaken by its key's retry: that re-execution
// finds its id listed, passes the cap, writes the run and answers 201;
// the stalled execution then finds the run written and writes no second
// one. The failed run lists exactly the cap, one run retries it, the key
// replays its run, and another key is refused. Without transactions, on
// every engine.
func TestRetryOvertakenBetweenListingAndWrite(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		const tenant = "acme"
		hold := &holdPut{reached: make(chan struct{}), release: make(chan struct{})}
		c := e.Client(dynamotest.FastRetries)
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, hold.option), Table: e.CreateTable(t, "RunsTable")}
		_, st := dynamoStores(t, e, c, false)
		clk := clock.NewManual(time.Now().UTC().Truncate(time.Millisecond))
		f := hostOf(t, rs, idem.Config{Store: st, Test: idem.TestConfig{Clock: clk}}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
		failed := failedBelowTheCap(t, rs, tenant, clk.Now())
		req := ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "k-retry-overtaken-0123456789ab", "")
		hold.mu.Lock()
		hold.armed = true
		hold.mu.Unlock()
		stalled := make(chan retryAnswer, 1)
		go func() {
			r, err := f.h.Handle(ctx, req)
			if err != nil {
				t.Errorf("the stalled execution: %v", err)
			}
			stalled <- retryAnswer{r.StatusCode, r.Body}
		}()
		<-hold.reached
		clk.Advance(idem.DefaultLease + time.Second)
		r, m := f.do(t, req)
		id, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || id == "" {
			close(hold.release)
			t.Fatalf("the key's retry overtaking the stalled execution: %d %s", r.StatusCode, r.Body)
		}
		close(hold.release)
		first := <-stalled
		// Its claim taken over, it is told to retry with its key (which
		// replays the 201), or 201 with the same run.
		inFlight := first.status == http.StatusConflict && strings.Contains(first.body, `"idempotency_in_flight"`)
		if !inFlight && (first.status != http.StatusCreated || !strings.Contains(first.body, fmt.Sprintf("%q", id))) {
			t.Fatalf("the stalled execution: %d %s; want 409 idempotency_in_flight or 201 naming %s", first.status, first.body, id)
		}
		if got, err := rs.Get(ctx, failed.ID); err != nil || len(got.Retries) != MaxRunRetries || !slices.Contains(got.Retries, id) {
			t.Fatalf("the failed run lists %d retries (%v), its run listed %v", len(got.Retries), err, slices.Contains(got.Retries, id))
		}
		if found := retryRunsOf(t, e, rs, failed.ID); len(found) != 1 || found[0].ID != id {
			t.Fatalf("%d runs retry the failed run; want its one run %s", len(found), id)
		}
		if again, m := f.do(t, req); again.StatusCode != http.StatusCreated || m["runId"] != id {
			t.Fatalf("the key again: %d %s", again.StatusCode, again.Body)
		}
		other, m := f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, "k-retry-other-0123456789abcd", ""))
		if other.StatusCode != http.StatusConflict || m["error"] != CodeRetryLimitReached {
			t.Fatalf("another key at the cap: %d %s", other.StatusCode, other.Body)
		}
	})
}
