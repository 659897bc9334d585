package dynamostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// want503 checks the store-unavailable answer: 503, the envelope with
// idemkit.store_unavailable, and Retry-After.
func want503(t *testing.T, r events.APIGatewayV2HTTPResponse) {
	t.Helper()
	var env struct {
		Error, Message string
	}
	_ = json.Unmarshal([]byte(r.Body), &env)
	if r.StatusCode != 503 || env.Error != idem.CodeStoreUnavailable || env.Message == "" || r.Headers["Retry-After"] == "" {
		t.Fatalf("%d %v %s; want 503 %s with Retry-After", r.StatusCode, r.Headers, r.Body, idem.CodeStoreUnavailable)
	}
}

func unavailableGuard(t *testing.T, s idem.Store, metrics ...idem.Metrics) *idem.Guard {
	t.Helper()
	cfg := idem.Config{
		Tenant: idem.AuthorizerKey("tenantId"),
		Store:  s,
		Wait:   -1, // a duplicate is answered at once
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if len(metrics) > 0 {
		cfg.Metrics = metrics[0]
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStoreThrottled503RetryAfter: on every engine, DynamoDB throttling or
// a 5xx (injected on every attempt, after the SDK's retries) gets the
// client 503 idemkit.store_unavailable with Retry-After in the envelope: at
// the claim the handler does not run and a retry once the store is back
// runs it once; at the completion the record stays claimed, so a retry is
// in flight, never a second execution. Each 503 is counted once in
// idem.MetricStoreUnavailable (the store-unavailable alarm's metric). A
// store that refuses connections is unavailable too.
func TestStoreThrottled503RetryAfter(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		for _, c := range []struct {
			name   string
			inject func()
			ran    int32
		}{
			{"ThrottledClaim", func() { v.f.FailNext(dynamotest.AnyOp, 1000, dynamotest.Throttle()) }, 0},
			{"ClaimInternalServerError", func() { v.f.FailNext(dynamotest.AnyOp, 1000, dynamotest.InternalServerError()) }, 0},
			{"ThrottledCompletion", func() { v.f.PassNext("PutItem", 1); v.f.FailNext(dynamotest.AnyOp, 1000, dynamotest.Throttle()) }, 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				m := &testutil.Counts{}
				g := unavailableGuard(t, v.s, m)
				h := &countingHandler{}
				ev := guardEvent(newKey(), `{"a":1}`)
				c.inject()
				want503(t, call(t, g.HTTPAPI(h.serve), ev))
				v.f.Clear()
				if n := m.Get(idem.MetricStoreUnavailable); n != 1 {
					t.Fatalf("%s counted %v times, want 1", idem.MetricStoreUnavailable, n)
				}
				if h.runs.Load() != c.ran {
					t.Fatalf("handler ran %d times, want %d", h.runs.Load(), c.ran)
				}
				r := call(t, g.HTTPAPI(h.serve), ev)
				switch {
				case c.ran == 0 && r.StatusCode == 201:
				case c.ran == 1 && r.StatusCode == 409 && r.Headers["Retry-After"] != "":
				default:
					t.Fatalf("retry: %d %s", r.StatusCode, r.Body)
				}
				if h.runs.Load() != 1 {
					t.Fatalf("handler ran %d times", h.runs.Load())
				}
				if n := m.Get(idem.MetricStoreUnavailable); n != 1 {
					t.Fatalf("after the retry, %s counted %v times, want 1", idem.MetricStoreUnavailable, n)
				}
			})
		}
		t.Run("ConnectionRefused", func(t *testing.T) {
			addr := testutil.FreeAddr(t) // nothing listens there
			down := newStore(t, emulator.Client("http://"+addr, dynamotest.FastRetries), v.table)
			if _, err := down.Claim(ctxT(t), pending(newID(), "o1", v.now), v.now); !errors.Is(err, idem.ErrStoreUnavailable) {
				t.Fatalf("Claim on a refused connection: %v", err)
			}
			want503(t, call(t, unavailableGuard(t, down).HTTPAPI((&countingHandler{}).serve), guardEvent(newKey(), `{}`)))
		})
	})
}

// pausableEngines are the engines the stalled-store test stops: DynamoDB
// Local (AWS's own engine) and moto.
var pausableEngines = []string{dynamotest.DynamoDBLocal, dynamotest.Moto}

// TestStalledStoreCompletionAnswers503: on DynamoDB Local and moto, the
// engine is stopped (SIGSTOP, every thread of it) while a request
// completes: the handler stops it just before it returns its 201. The
// completion is bounded by the request's deadline, so the client gets 503 idemkit.store_unavailable
// with Retry-After, not a hang. Once the engine resumes (SIGCONT), a retry
// with the same key sees what the lease rules say: in flight (the
// completion was lost; the lease is still live) or the replay (the engine
// applied it after all), and the handler never runs twice.
//
// The two engines run at once, each on an engine of its own: each one's
// time is its engine's start and the request's deadline run out.
func TestStalledStoreCompletionAnswers503(t *testing.T) {
	dynamotest.ForKindsConcurrently(t, pausableEngines, func(t *testing.T, kind string) {
		if !want(kind) {
			t.Skipf("%s not in DYNAMOTEST_KINDS", kind)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		srv, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: filepath.Join(dynamotest.RepoRoot(), "tools"), SharedDB: true})
		if err != nil {
			testutil.Unavailable(t, "%s unavailable: %v", kind, err)
		}
		stopped := false
		resume := func() {
			if stopped {
				_ = srv.Resume()
				stopped = false
			}
		}
		t.Cleanup(func() { resume(); srv.Stop() })
		// The engine's own process, not the shared one: other tests keep
		// theirs.
		e := &dynamotest.Emulator{Kind: kind, Endpoint: srv.Endpoint, Region: dynamotest.DefaultRegion, DeletesExpired: kind == dynamotest.DynamoDBLocal}
		table := e.CreateTable(t, "IdempotencyTable")
		s := newStore(t, e.Client(), table)
		// The Guard's clock stands still: the first attempt's lease can
		// never lapse before the retry, however slowly this machine
		// gets from the stall to the retry, so the retry meets the
		// claim (or its landed outcome), never an expired lease it
		// would execute again. The stall itself is real: the request's
		// deadline, on the wall clock.
		g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, Wait: -1,
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Test: idem.TestConfig{Clock: ledgertest.NewClock(time.Now())}})
		if err != nil {
			t.Fatal(err)
		}
		// The request's deadline starts when the handler does, so the
		// claim before it never races the deadline however slow the
		// engine's first calls are on a loaded machine (a claim that
		// ran out of time was a 503 too, and the retry then a first
		// execution, not the replay or in-flight answer checked below).
		rctx := newArmedCtx(ctx)
		// The engine is stopped before the handler returns, and the
		// completion is sent only once every thread of it has stopped
		// (Pause waits for that state): a bare SIGSTOP returns while a
		// thread of the engine may still run and answer the completion.
		h := &countingHandler{before: func(context.Context, int32) {
			stopped = true
			if err := srv.Pause(ctx); err != nil {
				t.Error(err)
			}
			rctx.arm(5 * time.Second)
		}}
		ev := guardEvent(newKey(), `{"a":1}`)
		r, err := g.HTTPAPI(h.serve)(rctx, ev)
		if h.runs.Load() != 1 {
			t.Fatalf("the handler ran %d times before the stall", h.runs.Load())
		}
		if err != nil {
			t.Fatal(err)
		}
		want503(t, r)
		resume()
		h.before = nil
		retry := call(t, g.HTTPAPI(h.serve), ev)
		switch {
		case retry.StatusCode == 409 && retry.Headers["Retry-After"] != "":
		case retry.StatusCode == 201 && retry.Headers["Openwop-Idempotent-Replay"] == "true":
		default:
			t.Fatalf("retry after the engine resumed: %d %v %s", retry.StatusCode, retry.Headers, retry.Body)
		}
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times", n)
		}
	})
}

// want reports whether kind is among the kinds this run tests.
func want(kind string) bool {
	for _, k := range dynamotest.Kinds() {
		if k == kind {
			return true
		}
	}
	return false
}

// armedCtx is a request context whose deadline is set when arm is called
// (the handler starts), beneath its parent's.
type armedCtx struct {
	context.Context
	mu       sync.Mutex
	deadline time.Time
	done     chan struct{}
	err      error
}

func newArmedCtx(parent context.Context) *armedCtx {
	c := &armedCtx{Context: parent, done: make(chan struct{})}
	context.AfterFunc(parent, func() { c.end(parent.Err()) })
	return c
}

func (c *armedCtx) arm(d time.Duration) {
	c.mu.Lock()
	c.deadline = time.Now().Add(d)
	c.mu.Unlock()
	time.AfterFunc(d, func() { c.end(context.DeadlineExceeded) })
}

func (c *armedCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

func (c *armedCtx) Deadline() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deadline.IsZero() {
		return c.Context.Deadline()
	}
	return c.deadline, true
}

func (c *armedCtx) Done() <-chan struct{} { return c.done }

func (c *armedCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
