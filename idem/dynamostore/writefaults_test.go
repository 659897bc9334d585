package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestLayer1WritesUnderFaults: on every engine, faults injected on the
// writes after the claim never run a handler twice for one execution,
// never replay a wrong answer and never answer 500 for the store's
// failure. A reclaim (UpdateItem) applied with every answer lost is 503
// and given back, so the retry at once runs. A release after a retryable
// 500 applied with every answer lost leaves the key retryable (the retry
// runs again); throttled past the SDK's retries it leaves the record
// claimed (the retry is 409 in flight, with Retry-After). A chunked
// response whose chunk write is refused for good is recorded as not kept
// (the first caller gets the true 201, the retry 410), and so is one whose
// chunk writes are throttled past the retries, its record's write never
// sent (RED_TEAM 419: before, 503 with the record left claimed, and the
// handler ran again once the lease ended); when the record's own write is
// throttled too it is 503 with the record claimed.
// (The chunks written are deleted, best effort: a chunk write cut in
// flight can land after its delete, referenced by nothing, until its TTL.) Parallel duplicates
// waiting on a first request whose completion lands with every answer
// lost all get its replay, the first its own answer.
func TestLayer1WritesUnderFaults(t *testing.T) {
	raw := make([]byte, 900<<10)
	_, _ = rand.Read(raw)
	chunked := `"` + base64.StdEncoding.EncodeToString(raw) + `"` // 1.2 MB: several chunk items
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		g := unavailableGuard(t, v.s)
		handler := func(runs *atomic.Int32, status *atomic.Int32, body string) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs.Add(1)
				return events.APIGatewayV2HTTPResponse{StatusCode: int(status.Load()), Body: body}, nil
			}
		}

		t.Run("reclaim applied, every answer lost", func(t *testing.T) {
			v.f.Clear()
			var runs, status atomic.Int32
			status.Store(503)
			h := g.HTTPAPI(handler(&runs, &status, `{"n":1}`))
			ev := guardEvent(newKey(), `{"a":1}`)
			if r := call(t, h, ev); r.StatusCode != 503 {
				t.Fatalf("first: %d", r.StatusCode)
			}
			status.Store(201)
			v.f.FailNextAfterSend("UpdateItem", 3, dynamotest.ResponseLost())
			want503(t, call(t, h, ev))
			if v.f.Pending() != 0 || runs.Load() != 1 {
				t.Fatalf("faults pending %d, runs %d", v.f.Pending(), runs.Load())
			}
			v.f.Clear()
			if r := call(t, h, ev); r.StatusCode != 201 || replayed(r.Headers) || runs.Load() != 2 {
				t.Fatalf("retry at once: %d (runs %d); want the handler run", r.StatusCode, runs.Load())
			}
			if r := call(t, h, ev); r.StatusCode != 201 || !replayed(r.Headers) || runs.Load() != 2 {
				t.Fatalf("next: %d (runs %d); want the replay", r.StatusCode, runs.Load())
			}
		})

		for _, c := range []struct {
			name   string
			inject func()
			landed bool
		}{
			{"release applied, every answer lost", func() { v.f.FailNextAfterSend("UpdateItem", 3, dynamotest.ResponseLost()) }, true},
			{"release throttled", func() { v.f.FailNext("UpdateItem", 3, dynamotest.Throttle()) }, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				var runs, status atomic.Int32
				status.Store(500)
				h := g.HTTPAPI(handler(&runs, &status, `{"error":"internal_error","message":"x"}`))
				ev := guardEvent(newKey(), `{"a":1}`)
				c.inject()
				if r := call(t, h, ev); r.StatusCode != 500 || v.f.Pending() != 0 {
					t.Fatalf("first: %d, faults pending %d; want the handler's own 500", r.StatusCode, v.f.Pending())
				}
				v.f.Clear()
				r := call(t, h, ev)
				switch {
				case c.landed && r.StatusCode == 500 && runs.Load() == 2:
				case !c.landed && r.StatusCode == 409 && strings.Contains(r.Body, "idempotency_in_flight") && r.Headers["Retry-After"] != "" && runs.Load() == 1:
				default:
					t.Fatalf("retry: %d %s (runs %d)", r.StatusCode, r.Body, runs.Load())
				}
			})
		}

		for _, c := range []struct {
			name   string
			inject func()
			kept   bool // the not-kept outcome recorded: the true 201, then 410
		}{
			{"chunk refused for good", func() {
				v.f.PassNext("PutItem", 2) // the claim and one chunk
				v.f.FailNext("PutItem", 1, &smithy.GenericAPIError{Code: "ValidationException", Message: "injected"})
			}, true},
			{"chunks throttled", func() {
				v.f.FailNextIf("PutItem", 1000, dynamotest.Throttle(), chunkPut)
			}, true},
			{"chunks and record throttled", func() {
				v.f.PassNext("PutItem", 2)
				v.f.FailNext("PutItem", 1000, dynamotest.Throttle())
			}, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				var runs, status atomic.Int32
				status.Store(201)
				h := g.HTTPAPI(handler(&runs, &status, chunked))
				ev := guardEvent(newKey(), `{"a":1}`)
				c.inject()
				first := call(t, h, ev)
				v.f.Clear()
				refused := c.kept
				if refused {
					if first.StatusCode != 201 || first.Body != chunked {
						t.Fatalf("first: %d %.200s; want the true 201", first.StatusCode, first.Body)
					}
				} else {
					want503(t, first)
				}
				r := call(t, h, ev)
				if refused {
					notKeptAnswer(t, r, 201, len(chunked))
				} else if r.StatusCode != 409 || !strings.Contains(r.Body, "idempotency_in_flight") {
					t.Fatalf("retry: %d %.200s; want 409 in flight", r.StatusCode, r.Body)
				}
				if runs.Load() != 1 {
					t.Fatalf("handler ran %d times", runs.Load())
				}
			})
		}

		t.Run("parallel duplicates, completion landed with every answer lost", func(t *testing.T) {
			v.f.Clear()
			g2 := newGuard(t, v, clock.NewManual(time.Now()))
			var runs atomic.Int32
			started, release := make(chan struct{}), make(chan struct{})
			h := g2.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				if runs.Add(1) == 1 {
					close(started)
				}
				<-release
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: `{"run":"r-1"}`}, nil
			})
			ev := guardEvent(newKey(), `{"a":1}`)
			first := make(chan events.APIGatewayV2HTTPResponse, 1)
			go func() { first <- call(t, h, ev) }()
			<-started
			const n = 4
			dups := make([]events.APIGatewayV2HTTPResponse, n)
			done := make(chan struct{})
			v.cnt.Reset()
			go func() { together(n, func(i int) { dups[i] = call(t, h, ev) }); close(done) }()
			// Armed once every duplicate's claim (a PutItem, the only ones
			// while the first is held) has been answered: only the
			// completion's PutItem is hit.
			for end := time.Now().Add(time.Minute); v.cnt.Ops()["PutItem"] < n; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("the duplicates never waited: %v", v.cnt.Ops())
				}
			}
			v.f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
			close(release)
			r := <-first
			<-done
			v.f.Clear()
			if r.StatusCode != 201 || replayed(r.Headers) {
				t.Fatalf("first: %d %s; want its own 201", r.StatusCode, r.Body)
			}
			for _, d := range dups {
				if d.StatusCode != 201 || d.Body != `{"run":"r-1"}` || !replayed(d.Headers) {
					t.Fatalf("duplicate: %d %s; want the replay", d.StatusCode, d.Body)
				}
			}
			if runs.Load() != 1 {
				t.Fatalf("handler ran %d times", runs.Load())
			}
		})
	})
}

// TestTransactionalChunkWriteFailsMidway: on the engines with
// transactions, a completion with idem.Transact writes whose response is
// stored in chunk items, one chunk write throttled past the SDK's retries
// midway: nothing of the handler's writes commits (the transaction is
// never sent), the caller gets 503, the record is released, and the retry
// runs the handler once more and commits its write once; the next is the
// replay. A chunk write applied with every answer lost is retried by the
// SDK (chunk writes are plain puts under a fresh key), and the completion
// commits once, the first caller getting its own answer.
func TestTransactionalChunkWriteFailsMidway(t *testing.T) {
	raw := make([]byte, 900<<10)
	_, _ = rand.Read(raw)
	chunked := `"` + base64.StdEncoding.EncodeToString(raw) + `"`
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		g := unavailableGuard(t, v.s)
		for _, c := range []struct {
			name      string
			inject    func()
			committed bool // by the first request
		}{
			{"throttled", func() { v.f.PassNext("PutItem", 2); v.f.FailNext("PutItem", 1000, dynamotest.Throttle()) }, false},
			{"applied, answer lost", func() { v.f.PassNext("PutItem", 2); v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost()) }, true},
		} {
			t.Run(c.name, func(t *testing.T) {
				v.f.Clear()
				key := newKey()
				var runs atomic.Int32
				h := g.HTTPAPI(func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					runs.Add(1)
					if err := idem.Transact(ctx, businessPut(biz, "chunk-"+key)); err != nil {
						return events.APIGatewayV2HTTPResponse{}, err
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: chunked}, nil
				})
				ev := guardEvent(key, `{"a":1}`)
				c.inject()
				first := call(t, h, ev)
				v.f.Clear()
				if got := businessExists(t, v.c, biz, "chunk-"+key); got != c.committed {
					t.Fatalf("business write committed %t, want %t", got, c.committed)
				}
				if c.committed {
					if first.StatusCode != 201 || first.Body != chunked || replayed(first.Headers) {
						t.Fatalf("first: %d %.200s; want its own 201", first.StatusCode, first.Body)
					}
				} else {
					want503(t, first)
					r := call(t, h, ev)
					if r.StatusCode != 201 || r.Body != chunked || replayed(r.Headers) || runs.Load() != 2 {
						t.Fatalf("retry: %d %.200s (runs %d); want the handler run again", r.StatusCode, r.Body, runs.Load())
					}
				}
				r := call(t, h, ev)
				if r.StatusCode != 201 || r.Body != chunked || !replayed(r.Headers) {
					t.Fatalf("next: %d %.200s; want the replay", r.StatusCode, r.Body)
				}
				if !businessExists(t, v.c, biz, "chunk-"+key) {
					t.Fatal("the business write is missing")
				}
			})
		}
	})
}

// stallChunkPuts is a client option under which every chunk item's
// PutItem waits for its call's context to end and fails with its error,
// as a store that stopped answering those writes; the record's own
// writes go through.
func stallChunkPuts(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("test.stallChunkPuts",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if chunkPut(in.Parameters) {
					<-ctx.Done()
					return middleware.InitializeOutput{}, middleware.Metadata{}, ctx.Err()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// TestChunkWritesStalledPastTheStoreTimeoutRunOnce: on every engine, a
// large answer whose chunk writes stall until the call's bound
// (Config.StoreTimeout) ends never had its record's write sent: the
// not-kept outcome is written in its place with a deadline of its own
// (RED_TEAM 420), so the caller gets the true 201 and every retry, past
// the lease too, 410 idemkit.response_not_kept; the handler runs once.
// Before, that write was made under the deadline already passed and
// failed unsent: 503, the record left claimed, and the handler ran again
// once the lease ended. The engines run at once: each one's time is the
// bound waited out.
func TestChunkWritesStalledPastTheStoreTimeoutRunOnce(t *testing.T) {
	raw := make([]byte, 900<<10)
	_, _ = rand.Read(raw)
	chunked := `"` + base64.StdEncoding.EncodeToString(raw) + `"`
	dynamotest.ForEachConcurrently(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "IdempotencyTable")
		s := newStore(t, e.Client(dynamotest.FastRetries, stallChunkPuts), table)
		clk := clock.NewManual(time.Now())
		// The bound is waited out once (the stalled chunk writes); it is
		// wide, as the not-kept write after them gets as much on a
		// loaded machine.
		g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, StoreTimeout: 5 * time.Second, Wait: -1,
			Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		var runs atomic.Int32
		h := g.HTTPAPI(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: chunked}, nil
		})
		ev := guardEvent(newKey(), `{"a":1}`)
		if r := call(t, h, ev); r.StatusCode != 201 || r.Body != chunked {
			t.Fatalf("first: %d %.200s; want the true 201", r.StatusCode, r.Body)
		}
		for range 2 {
			notKeptAnswer(t, call(t, h, ev), 201, len(chunked))
			clk.Advance(2 * g.Config().Lease)
		}
		if runs.Load() != 1 {
			t.Fatalf("handler ran %d times", runs.Load())
		}
	})
}
