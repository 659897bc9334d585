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
	return s.Store.Claim(ctx, rec, now)
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

func (s *stallStore) Release(ctx context.Context, id, owner string, now time.Time) error {
	if err := s.hold(ctx, "Release"); err != nil {
		return err
	}
	return s.Store.Release(ctx, id, owner, now)
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

// requestCtx is a request's context with its deadline (the Lambda deadline,
// a server's request timeout).
func requestCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
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
// flight (the completion was lost) or the replay (it landed after all),
// and the handler never runs twice.
func TestStalledStoreCompletionAnswers503(t *testing.T) {
	for _, applied := range []bool{false, true} {
		t.Run(map[bool]string{false: "lost", true: "landed"}[applied], func(t *testing.T) {
			s := newStallStore("Complete")
			s.applied = applied
			// The Guard's clock stands still, so the first attempt's lease
			// never lapses before the retry however slowly this machine
			// gets there (a lapsed lease would make the retry a second
			// execution); the stall is the request's real deadline.
			g := stallGuard(t, s, func(c *idem.Config) { c.Test.Clock = ledgertest.NewClock(time.Now()) })
			h := &handler{}
			ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
			r := answerWithin(t, func() events.APIGatewayV2HTTPResponse {
				r, err := g.HTTPAPI(h.v2)(requestCtx(t), ev)
				if err != nil {
					t.Error(err)
				}
				return r
			})
			want503(t, r.StatusCode, v2Header(r), r.Body)
			s.heal()
			retry, _ := g.HTTPAPI(h.v2)(requestCtx(t), ev)
			switch {
			case !applied && retry.StatusCode == 409 && strings.Contains(retry.Body, "idempotency_in_flight") && retry.Headers["Retry-After"] != "":
			case applied && retry.StatusCode == 201 && v2Header(retry).Get("OpenWOP-Idempotent-Replay") == "true":
			default:
				t.Fatalf("retry: %d %v %s", retry.StatusCode, retry.Headers, retry.Body)
			}
			if h.Calls() != 1 {
				t.Fatalf("handler ran %d times", h.Calls())
			}
		})
	}
}

// TestStalledStoreNeverHoldsARequest: every store call on a request's path
// is bounded: a stalled claim answers 503 (the handler never ran), a
// stalled release (after a retryable outcome) or delete (after an outcome
// that is never cached) still answers the handler's response, a stalled
// poll of a waiting duplicate answers 409 in flight, and a stalled
// heartbeat renewal does not hold the request once the handler is done.
func TestStalledStoreNeverHoldsARequest(t *testing.T) {
	call := func(t *testing.T, g *idem.Guard, h *handler, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		return answerWithin(t, func() events.APIGatewayV2HTTPResponse {
			r, _ := g.HTTPAPI(h.v2)(requestCtx(t), ev)
			return r
		})
	}
	t.Run("Claim", func(t *testing.T) {
		s := newStallStore("Claim")
		h := &handler{}
		r := call(t, stallGuard(t, s, nil), h, v2event("POST", "POST /runs", testKey, `{}`))
		want503(t, r.StatusCode, v2Header(r), r.Body)
		if h.Calls() != 0 {
			t.Fatal("the handler ran without a claim")
		}
	})
	t.Run("Release", func(t *testing.T) {
		s := newStallStore("Release")
		h := &handler{status: 500, body: `{"error":"internal_error","message":"x"}`}
		if r := call(t, stallGuard(t, s, nil), h, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 500 {
			t.Fatalf("status %d", r.StatusCode)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		s := newStallStore("Delete")
		h := &handler{status: 400, body: `{"error":"validation_error","message":"x"}`}
		if r := call(t, stallGuard(t, s, nil), h, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 400 {
			t.Fatalf("status %d", r.StatusCode)
		}
	})
	t.Run("Poll", func(t *testing.T) {
		s := newStallStore()
		g := stallGuard(t, s, func(c *idem.Config) { c.Wait = time.Minute })
		block := make(chan struct{})
		h := &handler{block: block}
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		first := make(chan events.APIGatewayV2HTTPResponse, 1)
		go func() { r, _ := g.HTTPAPI(h.v2)(context.Background(), ev); first <- r }()
		for h.Calls() == 0 {
			time.Sleep(time.Millisecond)
		}
		s.mu.Lock()
		s.stall["Get"] = true
		s.mu.Unlock()
		dup := call(t, g, h, ev)
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
		h := &handler{before: func(context.Context) { <-s.stalled }} // runs until a renewal stalls
		if r := call(t, g, h, v2event("POST", "POST /runs", testKey, `{}`)); r.StatusCode != 201 {
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
		mux := http.NewServeMux()
		mux.Handle("POST /orders", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(201)
		})))
		w := answerWithin(t, func() *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(requestCtx(t), "POST", "/orders", strings.NewReader(`{}`))
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
		fn, err := event.Func(g, event.Config[string]{Operation: "charge", Key: func(k string) (string, error) { return k, nil }},
			func(ctx context.Context, in string) (string, error) { runs++; return "charged " + in, nil })
		if err != nil {
			t.Fatal(err)
		}
		type res struct {
			out string
			err error
		}
		got := answerWithin(t, func() res { o, err := fn(requestCtx(t), "order-1"); return res{o, err} })
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
