package idem_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/idem/event"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/emf"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// stallStore is a memstore whose chosen calls stall as a stopped store
// does: they never answer until their context ends (then they fail with the
// context's error). With applied set, a stalled write is applied first and
// only its answer is lost (the engine wrote it, then stopped).
type stallStore struct {
	*memstore.Store
	mu      sync.Mutex
	stall   map[string]bool // "Claim", "Get", "Complete", "Release", "Delete", "Renew"
	applied bool
	stalled chan string // one send per stalled call
	// unavailable, when set, is the error of the chosen calls instead of a
	// stall (a throttled or unreachable store).
	unavailable error
	// claimed, when set, is called after each Claim returned.
	claimed func()
}

func newStallStore(ops ...string) *stallStore {
	s := &stallStore{Store: memstore.New(), stall: map[string]bool{}, stalled: make(chan string, 64)}
	for _, op := range ops {
		s.stall[op] = true
	}
	return s
}

func (s *stallStore) heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = map[string]bool{}
	s.unavailable = nil
}

// hold stalls call op until ctx ends, when op is chosen.
func (s *stallStore) hold(ctx context.Context, op string) error {
	s.mu.Lock()
	on, fail := s.stall[op], s.unavailable
	s.mu.Unlock()
	if !on {
		return nil
	}
	if fail != nil {
		return fail
	}
	s.stalled <- op
	<-ctx.Done()
	return fmt.Errorf("stalled %s: %w", op, ctx.Err())
}

func (s *stallStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	if err := s.hold(ctx, "Claim"); err != nil {
		return idem.ClaimResult{}, err
	}
	res, err := s.Store.Claim(ctx, rec, now)
	s.mu.Lock()
	claimed := s.claimed
	s.mu.Unlock()
	if claimed != nil {
		claimed()
	}
	return res, err
}

func (s *stallStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	if err := s.hold(ctx, "Get"); err != nil {
		return idem.Record{}, false, err
	}
	return s.Store.Get(ctx, id, now)
}

func (s *stallStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if s.applied {
		if err := s.Store.Complete(context.Background(), claim, out, now); err != nil {
			return err
		}
	}
	if err := s.hold(ctx, "Complete"); err != nil {
		return err
	}
	if s.applied {
		return nil
	}
	return s.Store.Complete(ctx, claim, out, now)
}

func (s *stallStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	if err := s.hold(ctx, "Release"); err != nil {
		return err
	}
	return s.Store.Release(ctx, claim, now)
}

func (s *stallStore) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	if err := s.hold(ctx, "Renew"); err != nil {
		return err
	}
	return s.Store.Renew(ctx, id, owner, leaseExpires, now)
}

func (s *stallStore) Delete(ctx context.Context, id, owner string, now time.Time) error {
	if err := s.hold(ctx, "Delete"); err != nil {
		return err
	}
	return s.Store.Delete(ctx, id, owner, now)
}

// answerWithin runs call and returns its answer; a call that has not
// answered after a minute hangs on the stalled store, and fails the test
// (the bound under test is far below: the request's deadline).
func answerWithin[T any](t *testing.T, call func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- call() }()
	select {
	case a := <-done:
		return a
	case <-time.After(time.Minute):
		t.Fatal("no answer: the request hangs on the stalled store")
		panic("unreachable")
	}
}

// requestDeadline is the request's deadline in the stall tests, from the
// moment the test arms it.
const requestDeadline = 2 * time.Second

// reqCtx is a request's context with its deadline (the Lambda deadline, a
// server's request timeout), set when the test arms it: requestDeadline
// from then on. Before that the deadline is ten minutes away, a hang guard
// that only ends a failing test. A test arms it once the work before the
// stalled call is done (the handler runs), so that the deadline bounds the
// stall and never races the claim or the handler on a slow machine: the
// stalled call's bound is computed from the deadline when the call starts,
// after the arming.
type reqCtx struct {
	context.Context // values only
	mu              sync.Mutex
	deadline        time.Time
	timer           *time.Timer
	done            chan struct{}
	err             error
}

func newReqCtx(t *testing.T) *reqCtx {
	c := &reqCtx{Context: context.Background(), done: make(chan struct{})}
	c.set(10 * time.Minute)
	t.Cleanup(func() { c.end(context.Canceled) })
	return c
}

// armed returns a request context armed at once: the first store call is
// the stalled one, with no work before it.
func armed(t *testing.T) *reqCtx {
	c := newReqCtx(t)
	c.arm()
	return c
}

// arm sets the deadline requestDeadline from now.
func (c *reqCtx) arm() { c.set(requestDeadline) }

func (c *reqCtx) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer != nil {
		c.timer.Stop()
	}
	c.deadline = time.Now().Add(d)
	c.timer = time.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
}

func (c *reqCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer.Stop()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

func (c *reqCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadline, true
}

func (c *reqCtx) Done() <-chan struct{} { return c.done }

func (c *reqCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func stallGuard(t *testing.T, s idem.Store, mod func(*idem.Config)) *idem.Guard {
	t.Helper()
	cfg := idem.Config{Store: s, Tenant: idem.AuthorizerKey("tenantId"), Logger: discardLogger(), Wait: -1}
	if mod != nil {
		mod(&cfg)
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// want503 checks the store-unavailable answer: 503, the envelope with
// idemkit.store_unavailable, and Retry-After.
func want503(t *testing.T, status int, h http.Header, body string) {
	t.Helper()
	if status != 503 {
		t.Fatalf("status %d, want 503 (body %s)", status, body)
	}
	if code, _ := envelope(t, body); code != idem.CodeStoreUnavailable {
		t.Fatalf("code %q, want %s", code, idem.CodeStoreUnavailable)
	}
	if h.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", h)
	}
}

func v2Header(r events.APIGatewayV2HTTPResponse) http.Header {
	h := http.Header{}
	for k, v := range r.Headers {
		h.Set(k, v)
	}
	return h
}

// TestStalledStoreCompletionAnswers503: the store stops answering while a
// request completes. The completion runs without the request's
// cancellation but under its bound (the request's deadline less the
// margin), so the client gets 503 idemkit.store_unavailable with
// Retry-After in the envelope, not a hang and not the unrecorded 201. The
// record stays claimed: a retry with the same key sees the request in
// flight (the completion was lost), and the handler never runs twice.
func TestStalledStoreCompletionAnswers503(t *testing.T) {
	t.Run("lost", func(t *testing.T) { stalledCompletion(t, false) })
}

// TestStalledStoreCompletionThatLandedIsAnsweredAsWritten: as above, but
// the stalled completion was applied: the one bounded read after it finds
// this claim's own completion, so the client gets the handler's own 201
// (it is recorded), not a 503, and the retry the replay; the handler runs
// once.
func TestStalledStoreCompletionThatLandedIsAnsweredAsWritten(t *testing.T) {
	stalledCompletion(t, true)
}

// stalledCompletion stalls the store's completion of a request past the
// request's deadline, the completion applied or not, and checks the
// answer, the retry's and that the handler ran once.
func stalledCompletion(t *testing.T, applied bool) {
	t.Helper()
	s := newStallStore("Complete")
	s.applied = applied
	// The Guard's clock stands still, so the first attempt's lease
	// never lapses before the retry however slowly this machine
	// gets there (a lapsed lease would make the retry a second
	// execution); the stall is the request's real deadline.
	g := stallGuard(t, s, func(c *idem.Config) { c.Test.Clock = ledgertest.NewClock(time.Now()) })
	// The request's deadline is armed when the handler runs: it
	// bounds the stalled completion, never the claim before it.
	rctx := newReqCtx(t)
	h := &handler{before: func(context.Context) { rctx.arm() }}
	ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
	r := answerWithin(t, func() events.APIGatewayV2HTTPResponse {
		r, err := g.HTTPAPI(h.v2)(rctx, ev)
		if err != nil {
			t.Error(err)
		}
		return r
	})
	if applied {
		if r.StatusCode != 201 || v2Header(r).Get("OpenWOP-Idempotent-Replay") != "" {
			t.Fatalf("landed: %d %v %s; want the handler's own 201", r.StatusCode, r.Headers, r.Body)
		}
	} else {
		want503(t, r.StatusCode, v2Header(r), r.Body)
	}
	s.heal()
	h.before = nil
	// The retry meets a healed store: nothing stalls, so its
	// deadline is never armed (no race with this machine's speed).
	retry, _ := g.HTTPAPI(h.v2)(newReqCtx(t), ev)
	switch {
	case !applied && retry.StatusCode == 409 && strings.Contains(retry.Body, "idempotency_in_flight") && retry.Headers["Retry-After"] != "":
	case applied && retry.StatusCode == 201 && v2Header(retry).Get("OpenWOP-Idempotent-Replay") == "true":
	default:
		t.Fatalf("retry: %d %v %s", retry.StatusCode, retry.Headers, retry.Body)
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times", h.Calls())
	}
}

// TestStalledStoreNeverHoldsARequest: every store call on a request's path
// is bounded: a stalled claim answers 503 (the handler never ran), a
// stalled release (after a retryable outcome) or delete (after an outcome
// that is never cached) still answers the handler's response, a stalled
// poll of a waiting duplicate answers 409 in flight, and a stalled
// heartbeat renewal does not hold the request once the handler is done.
func TestStalledStoreNeverHoldsARequest(t *testing.T) {
	// call answers ev under rctx: a test arms its deadline where the work
	// before the stalled call is done.
	call := func(t *testing.T, g *idem.Guard, h *handler, rctx *reqCtx, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		return answerWithin(t, func() events.APIGatewayV2HTTPResponse {
			r, _ := g.HTTPAPI(h.v2)(rctx, ev)
			return r
		})
	}
	// armedByHandler is a handler that arms rctx's deadline when it runs
	// (the stalled call comes after it).
	armedByHandler := func(rctx *reqCtx, status int, body string) *handler {
		return &handler{status: status, body: body, before: func(context.Context) { rctx.arm() }}
	}
	t.Run("Claim", func(t *testing.T) {
		s := newStallStore("Claim")
		h := &handler{}
		r := call(t, stallGuard(t, s, nil), h, armed(t), v2event("POST", "POST /runs", testKey, `{}`))
		want503(t, r.StatusCode, v2Header(r), r.Body)
		if h.Calls() != 0 {
			t.Fatal("the handler ran without a claim")
		}
	})
	t.Run("Release", func(t *testing.T) {
		s := newStallStore("Release")
		rctx := newReqCtx(t)
		h := armedByHandler(rctx, 500, `{"error":"internal_error","message":"x"}`)
		if r := call(t, stallGuard(t, s, nil), h, rctx, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 500 {
			t.Fatalf("status %d", r.StatusCode)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		s := newStallStore("Delete")
		rctx := newReqCtx(t)
		h := armedByHandler(rctx, 400, `{"error":"validation_error","message":"x"}`)
		if r := call(t, stallGuard(t, s, nil), h, rctx, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 400 {
			t.Fatalf("status %d", r.StatusCode)
		}
	})
	t.Run("Poll", func(t *testing.T) {
		s := newStallStore()
		g := stallGuard(t, s, func(c *idem.Config) { c.Wait = time.Minute })
		block, running := make(chan struct{}), make(chan struct{})
		h := &handler{block: block, before: func(context.Context) { close(running) }}
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		first := make(chan events.APIGatewayV2HTTPResponse, 1)
		go func() { r, _ := g.HTTPAPI(h.v2)(context.Background(), ev); first <- r }()
		<-running
		// The duplicate's deadline is armed once its claim found the
		// first request pending: it bounds the wait and the stalled poll.
		rctx := newReqCtx(t)
		s.mu.Lock()
		s.stall["Get"] = true
		s.claimed = rctx.arm
		s.mu.Unlock()
		dup := call(t, g, h, rctx, ev)
		if dup.StatusCode != 409 || !strings.Contains(dup.Body, "idempotency_in_flight") {
			t.Fatalf("duplicate: %d %s", dup.StatusCode, dup.Body)
		}
		close(block)
		if r := <-first; r.StatusCode != 201 {
			t.Fatalf("first: %d", r.StatusCode)
		}
	})
	t.Run("Renew", func(t *testing.T) {
		s := newStallStore("Renew")
		g := stallGuard(t, s, func(c *idem.Config) { c.Heartbeat = 20 * time.Millisecond })
		rctx := newReqCtx(t)
		h := &handler{before: func(context.Context) { rctx.arm(); <-s.stalled }} // runs until a renewal stalls
		if r := call(t, g, h, rctx, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 201 {
			t.Fatalf("status %d %s", r.StatusCode, r.Body)
		}
	})
}

// TestStalledStoreCompletionAnswers503Middleware: the net/http middleware
// answers a stalled completion 503 with Retry-After within the request's
// deadline, and the SQS/event adapter returns the function's true result
// instead of hanging (the function ran once; its outcome stands
// unrecorded).
func TestStalledStoreCompletionAnswers503Middleware(t *testing.T) {
	t.Run("net/http", func(t *testing.T) {
		s := newStallStore("Complete")
		g := stallGuard(t, s, func(c *idem.Config) { c.Tenant = idem.SingleTenant("t") })
		rctx := newReqCtx(t) // armed when the handler runs: it bounds the stalled completion
		mux := http.NewServeMux()
		mux.Handle("POST /orders", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rctx.arm()
			w.WriteHeader(201)
		})))
		w := answerWithin(t, func() *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(rctx, "POST", "/orders", strings.NewReader(`{}`))
			req.Header.Set("Idempotency-Key", testKey)
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, req)
			return w
		})
		want503(t, w.Code, w.Header(), w.Body.String())
	})
	t.Run("event", func(t *testing.T) {
		s := newStallStore("Complete")
		g := stallGuard(t, s, func(c *idem.Config) { c.Tenant = idem.SingleTenant("t") })
		runs := 0
		rctx := newReqCtx(t) // armed when the function runs: it bounds the stalled completion
		fn, err := event.Func(g, event.Config[string]{Operation: "charge", Key: func(k string) (string, error) { return k, nil }},
			func(ctx context.Context, in string) (string, error) { rctx.arm(); runs++; return "charged " + in, nil })
		if err != nil {
			t.Fatal(err)
		}
		type res struct {
			out string
			err error
		}
		got := answerWithin(t, func() res { o, err := fn(rctx, "order-1"); return res{o, err} })
		if got.err != nil || got.out != "charged order-1" || runs != 1 {
			t.Fatalf("event: %q %v, %d runs", got.out, got.err, runs)
		}
	})
}

// TestStoreThrottled503RetryAfter: a store that is throttled or cannot be
// reached (its error wraps idem.ErrStoreUnavailable) gets the client 503
// idemkit.store_unavailable with Retry-After in the policy's envelope, at
// the claim (the handler does not run) and at the completion, never a 500
// that only invites a retry.
func TestStoreThrottled503RetryAfter(t *testing.T) {
	for _, op := range []string{"Claim", "Complete"} {
		t.Run(op, func(t *testing.T) {
			s := newStallStore(op)
			s.unavailable = fmt.Errorf("%w: throttled", idem.ErrStoreUnavailable)
			g := stallGuard(t, s, nil)
			h := &handler{}
			r, _ := g.HTTPAPI(h.v2)(context.Background(), v2event("POST", "POST /runs", testKey, `{}`))
			want503(t, r.StatusCode, v2Header(r), r.Body)
			if want := map[string]int{"Claim": 0, "Complete": 1}[op]; h.Calls() != want {
				t.Fatalf("handler ran %d times, want %d", h.Calls(), want)
			}
		})
	}
	t.Run("OtherStoreErrorIs500", func(t *testing.T) {
		s := newStallStore("Claim")
		s.unavailable = errors.New("some other store failure")
		r, _ := stallGuard(t, s, nil).HTTPAPI((&handler{}).v2)(context.Background(), v2event("POST", "POST /runs", testKey, `{}`))
		if code, _ := envelope(t, r.Body); r.StatusCode != 500 || code != "internal_error" {
			t.Fatalf("%d %s", r.StatusCode, r.Body)
		}
	})
}

// TestStoreUnavailableIsCounted: every 503 store_unavailable answer, at
// the claim or at the completion, is counted once in
// idem.MetricStoreUnavailable with no dimensions (the alarm on the rate
// watches exactly that); another store failure (a 500) is not.
func TestStoreUnavailableIsCounted(t *testing.T) {
	count := func(t *testing.T, op string, storeErr error) (int, string) {
		var metrics syncBuffer
		s := newStallStore(op)
		s.unavailable = storeErr
		g := stallGuard(t, s, func(c *idem.Config) { c.Metrics = emf.New(&metrics, "idemkit") })
		if _, err := g.HTTPAPI((&handler{}).v2)(context.Background(), v2event("POST", "POST /runs", testKey, `{}`)); err != nil {
			t.Fatal(err)
		}
		return strings.Count(metrics.String(), `"`+idem.MetricStoreUnavailable+`":1}`), metrics.String()
	}
	for _, op := range []string{"Claim", "Complete"} {
		if n, out := count(t, op, fmt.Errorf("%w: throttled", idem.ErrStoreUnavailable)); n != 1 {
			t.Errorf("503 at %s: %s counted %d times, want 1:\n%s", op, idem.MetricStoreUnavailable, n, out)
		}
	}
	if n, out := count(t, "Claim", errors.New("some other store failure")); n != 0 {
		t.Errorf("a 500 counted as store unavailable:\n%s", out)
	}
}

// TestStoreTimeoutConfig: StoreTimeout defaults to DefaultStoreTimeout and
// a negative value is refused.
func TestStoreTimeoutConfig(t *testing.T) {
	g := stallGuard(t, memstore.New(), nil)
	if got := g.Config().StoreTimeout; got != idem.DefaultStoreTimeout {
		t.Fatalf("default StoreTimeout %s", got)
	}
	_, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("t"), StoreTimeout: -time.Second})
	if !errors.Is(err, idem.ErrConfig) || !strings.Contains(err.Error(), "StoreTimeout") {
		t.Fatalf("negative StoreTimeout: %v", err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
