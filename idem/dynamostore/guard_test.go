package dynamostore_test

import (
	"context"
	"github.com/idemkit/idemkit/idem/keyspace"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// countingHandler counts executions; its body names the execution.
type countingHandler struct {
	runs   atomic.Int32
	status int
	before func(ctx context.Context, n int32)
}

func (h *countingHandler) serve(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	n := h.runs.Add(1)
	if h.before != nil {
		h.before(ctx, n)
	}
	st := h.status
	if st == 0 {
		st = 201
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: st, Headers: map[string]string{"Content-Type": "application/json"},
		Body: `{"execution":` + strconv.Itoa(int(n)) + `}`}, nil
}

func guardEvent(key, body string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		RouteKey: "POST /runs",
		Headers:  map[string]string{"idempotency-key": key, "content-type": "application/json"},
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-" + rnd(4),
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"},
			// The ERP policy's credential parts ride along (the other
			// policies read the tenant only).
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{
				"tenantId": "acme", "clientId": "erp-client", "companyId": "C100", "organizationId": "ORG-1"}},
		},
	}
}

func newKey() string { return "key-" + rnd(12) } // 28 chars, OpenWOP grammar

func newGuard(t *testing.T, v *env, clk *clock.Manual) *idem.Guard {
	t.Helper()
	g, err := idem.New(idem.Config{
		Tenant: idem.AuthorizerKey("tenantId"),
		Store:  v.s,
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
		// A duplicate waits for the winner: the budget is a hang guard, far
		// beyond any engine's answer on a loaded machine, so that no
		// duplicate is refused in flight because the machine is slow.
		Wait:   2 * time.Minute,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func call(t *testing.T, w idem.HTTPAPIHandler, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	r, err := w(ctxT(t), ev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGuardSDKRetriesNeverExecuteTwice: end to end through the Guard on
// DynamoDB (every engine), throttled attempts and writes whose response
// was lost are retried by the SDK, and the handler still runs exactly once
// per key; every later request is a byte-exact replay.
func TestGuardSDKRetriesNeverExecuteTwice(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(time.Now())
		g := newGuard(t, v, clk)

		for _, c := range []struct {
			name   string
			inject func()
		}{
			{"ThrottledClaim", func() { v.f.FailNext("PutItem", 2, dynamotest.Throttle()) }},
			// The completion is the second PutItem (the claim's passes).
			{"ThrottledCompletion", func() { v.f.PassNext("PutItem", 1); v.f.FailNext("PutItem", 2, dynamotest.Throttle()) }},
			{"ThrottledEverything", func() { v.f.FailNext(dynamotest.AnyOp, 2, dynamotest.Throttle()) }},
			{"ClaimAppliedResponseLost", func() { v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost()) }},
			{"CompletionAppliedResponseLost", func() {
				v.f.PassNext("PutItem", 1)
				v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			}},
			{"BothAppliedResponseLost", func() {
				v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
				v.f.PassNext("PutItem", 1) // the claim's retry
				v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			}},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				h := &countingHandler{}
				w := g.HTTPAPI(h.serve)
				key := newKey()
				c.inject()
				first := call(t, w, guardEvent(key, `{"a":1}`))
				if first.StatusCode != 201 || first.Body != `{"execution":1}` {
					t.Fatalf("first: %+v", first)
				}
				if v.f.Pending() != 0 || v.f.Fired() == 0 {
					t.Fatalf("faults not consumed: pending %d", v.f.Pending())
				}
				// Retries, themselves throttled, are replays.
				v.f.FailNext(dynamotest.AnyOp, 1, dynamotest.Throttle())
				for range 2 {
					r := call(t, w, guardEvent(key, `{ "a" : 1 }`))
					if r.StatusCode != 201 || r.Body != first.Body || r.Headers[idem.HeaderOpenWOPReplay] != "true" {
						t.Fatalf("retry: %+v", r)
					}
				}
				if n := h.runs.Load(); n != 1 {
					t.Fatalf("handler ran %d times", n)
				}
			})
		}

		t.Run("RetryableFailureThenThrottledReclaim", func(t *testing.T) {
			v.f.Clear()
			h := &countingHandler{status: 503}
			w := g.HTTPAPI(h.serve)
			key := newKey()
			if r := call(t, w, guardEvent(key, `{}`)); r.StatusCode != 503 {
				t.Fatalf("first: %+v", r)
			}
			h.status = 201
			// The reclaim (UpdateItem) is applied but its response lost; the
			// SDK retries; the handler must run once, not twice.
			v.f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			r := call(t, w, guardEvent(key, `{}`))
			if r.StatusCode != 201 || r.Body != `{"execution":2}` {
				t.Fatalf("reclaim: %+v", r)
			}
			if r := call(t, w, guardEvent(key, `{}`)); r.Body != `{"execution":2}` || r.Headers[idem.HeaderOpenWOPReplay] != "true" {
				t.Fatalf("replay: %+v", r)
			}
			if n := h.runs.Load(); n != 2 {
				t.Fatalf("handler ran %d times, want 2 (one failure, one success)", n)
			}
		})

		t.Run("ConcurrentDuplicatesUnderThrottling", func(t *testing.T) {
			v.f.Clear()
			// A patient retryer (10 attempts): 8 throttles spread over the
			// callers can never exhaust one call's attempts, so every caller
			// must end with the winner's response.
			patient := e.Client(func(o *dynamodb.Options) {
				o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
					so.MaxAttempts = 10
					so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
					so.RateLimiter = ratelimit.None
				})
			}, v.f.Middleware())
			pv := *v
			pv.s = newStore(t, patient, v.table)
			h := &countingHandler{before: func(context.Context, int32) { time.Sleep(100 * time.Millisecond) }}
			w := newGuard(t, &pv, clk).HTTPAPI(h.serve)
			key := newKey()
			v.f.FailNext(dynamotest.AnyOp, 8, dynamotest.Throttle())
			const n = 12
			out := make([]events.APIGatewayV2HTTPResponse, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := w(context.Background(), guardEvent(key, `{"x":1}`))
					if err != nil {
						t.Error(err)
					}
					out[i] = r
				}()
			}
			wg.Wait()
			replays := 0
			for _, r := range out {
				if r.StatusCode != 201 || r.Body != `{"execution":1}` {
					t.Fatalf("duplicate got %+v", r)
				}
				if r.Headers[idem.HeaderOpenWOPReplay] == "true" {
					replays++
				}
			}
			if h.runs.Load() != 1 || replays != n-1 {
				t.Fatalf("handler ran %d times, %d replays", h.runs.Load(), replays)
			}
		})

		t.Run("RoundTrips", func(t *testing.T) {
			// Through the Guard: first execution = 2 round trips (claim,
			// complete); a replay = 1 where the server returns ALL_OLD, else 2.
			v.f.Clear()
			h := &countingHandler{}
			w := g.HTTPAPI(h.serve)
			key := newKey()
			v.cnt.Reset()
			call(t, w, guardEvent(key, `{}`))
			if ops := v.cnt.Ops(); v.cnt.Total() != 2 || ops["PutItem"] != 2 || ops["UpdateItem"] != 0 {
				t.Fatalf("first execution: %d round trips %v", v.cnt.Total(), ops)
			}
			v.cnt.Reset()
			call(t, w, guardEvent(key, `{}`))
			want := 1
			if !e.Caps.ReturnValuesOnConditionCheckFailure {
				want = 2
			}
			if v.cnt.Total() != want {
				t.Fatalf("replay: %d round trips %v, want %d", v.cnt.Total(), v.cnt.Ops(), want)
			}
		})
	})
}

// TestGuardFencedTransactionalCompletion: through the Guard on DynamoDB with
// transactions (moto), a slow invocation whose lease was reclaimed cannot
// commit its business write: its fenced transaction writes nothing and it
// gets a retryable 409 idempotency_in_flight with Retry-After; the winner's
// business write and response stand.
func TestGuardFencedTransactionalCompletion(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		if !e.Caps.Transactions {
			// dynalite: the typed refusal is TestTransactionalCompletion; the
			// guard answers it with a retryable 500 (checked here).
			v := setup(t, e)
			biz := e.CreateTable(t, "RunsTable")
			g := newGuard(t, v, clock.NewManual(time.Now()))
			w := g.HTTPAPI((&countingHandler{before: func(ctx context.Context, _ int32) {
				_ = idem.Transact(ctx, businessPut(biz, "run-x"))
			}}).serve)
			if r := call(t, w, guardEvent(newKey(), `{}`)); r.StatusCode != 500 || businessExists(t, v.c, biz, "run-x") {
				t.Fatalf("no-transaction endpoint: %+v", r)
			}
			return
		}
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		clk := clock.NewManual(time.Now())
		g := newGuard(t, v, clk)
		key := newKey()
		release, started := make(chan struct{}), make(chan struct{})
		slow := &countingHandler{before: func(ctx context.Context, _ int32) {
			if err := idem.Transact(ctx, businessPut(biz, "run-slow")); err != nil {
				t.Error(err)
			}
			close(started)
			<-release
		}}
		var slowResp events.APIGatewayV2HTTPResponse
		done := make(chan struct{})
		go func() {
			defer close(done)
			slowResp, _ = g.HTTPAPI(slow.serve)(context.Background(), guardEvent(key, `{}`))
		}()
		<-started
		clk.Advance(idem.DefaultLease + time.Second)
		fast := &countingHandler{before: func(ctx context.Context, _ int32) {
			_ = idem.Transact(ctx, businessPut(biz, "run-fast"))
		}}
		if r := call(t, g.HTTPAPI(fast.serve), guardEvent(key, `{}`)); r.StatusCode != 201 {
			t.Fatalf("reclaim: %+v", r)
		}
		close(release)
		<-done
		if slowResp.StatusCode != 409 || slowResp.Headers["Retry-After"] == "" {
			t.Fatalf("fenced transaction answered %+v", slowResp)
		}
		if businessExists(t, v.c, biz, "run-slow") || !businessExists(t, v.c, biz, "run-fast") {
			t.Fatal("fenced transaction wrote, or the winner's write is missing")
		}
		r := call(t, g.HTTPAPI(fast.serve), guardEvent(key, `{}`))
		if r.Body != `{"execution":1}` || r.Headers[idem.HeaderOpenWOPReplay] != "true" || fast.runs.Load() != 1 {
			t.Fatalf("replay after fence: %+v", r)
		}
	})
}

// TestGuardSlowFirstInvocationIsFenced is the Powertools regression test on
// DynamoDB, through the Guard: the first invocation is slow, its lease is
// reclaimed and the second completes; the first's late completion, late
// delete (a 403) and late release (a 503) are all rejected, and the record
// keeps the second's response (attempt 2).
func TestGuardSlowFirstInvocationIsFenced(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		for _, late := range []int{201, 403, 503} {
			t.Run(strconv.Itoa(late), func(t *testing.T) {
				clk := clock.NewManual(time.Now())
				g := newGuard(t, v, clk)
				key := newKey()
				release, started := make(chan struct{}), make(chan struct{})
				slow := &countingHandler{status: late, before: func(context.Context, int32) { close(started); <-release }}
				var slowResp events.APIGatewayV2HTTPResponse
				done := make(chan struct{})
				go func() {
					defer close(done)
					slowResp, _ = g.HTTPAPI(slow.serve)(context.Background(), guardEvent(key, `{}`))
				}()
				<-started
				clk.Advance(idem.DefaultLease + time.Second)
				fast := &countingHandler{before: func(context.Context, int32) {}}
				w := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					r, err := fast.serve(ctx, ev)
					r.Body = `{"who":"fast"}`
					return r, err
				})
				if r := call(t, w, guardEvent(key, `{}`)); r.Body != `{"who":"fast"}` {
					t.Fatalf("reclaim: %+v", r)
				}
				close(release)
				<-done
				if late == 201 && slowResp.StatusCode != 409 {
					t.Fatalf("fenced late completion answered %+v", slowResp)
				}
				r := call(t, w, guardEvent(key, `{}`))
				if r.Body != `{"who":"fast"}` || r.Headers[idem.HeaderOpenWOPReplay] != "true" || fast.runs.Load() != 1 {
					t.Fatalf("record lost the second response: %+v", r)
				}
				rec, ok, err := v.s.Get(ctxT(t), keyspace.ID("tenant:acme", "POST /runs", key), clk.Now())
				if err != nil || !ok || rec.Attempt != 2 || rec.State != idem.StateCompleted {
					t.Fatalf("record %+v %v %v", rec, ok, err)
				}
			})
		}
	})
}
