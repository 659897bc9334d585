package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// throttledRenewals passes every call to the DynamoDB store; from the
// failFrom-th renewal on, it first schedules throttling of the store's
// UpdateItem calls past the SDK's retries (armed), so that the renewal
// fails, not fenced. Each renewal takes every on the Guard's clock,
// advanced inside the call on the heartbeat's goroutine. until is the end
// of the last lease written (the claim's, then each successful renewal's).
type throttledRenewals struct {
	idem.Store
	failFrom int
	arm      func()
	took     func()

	mu    sync.Mutex
	n     int
	until time.Time
}

func (s *throttledRenewals) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, rec, now)
	if err == nil && (res.Decision == idem.Claimed || res.Decision == idem.Reclaimed) {
		s.mu.Lock()
		s.until = rec.LeaseExpires
		s.mu.Unlock()
	}
	return res, err
}

func (s *throttledRenewals) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	defer s.took()
	if n == s.failFrom {
		s.arm()
	}
	err := s.Store.Renew(ctx, id, owner, leaseExpires, now)
	if err == nil {
		s.mu.Lock()
		s.until = leaseExpires
		s.mu.Unlock()
	}
	return err
}

func (s *throttledRenewals) lastUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until
}

// TestGuardLeaseCutWhenRenewalsFail: on every engine, with the heartbeat's
// renewals throttled past the SDK's retries (not fenced), the handler's
// context ends with cause ErrLeaseLost before the end of the last lease
// written (the claim's when the first renewal fails); a same-key request
// that reclaims after that end runs only once the first handler's context
// has ended, the first's completion is fenced (409 idempotency_in_flight)
// and the record keeps the second's response.
func TestGuardLeaseCutWhenRenewalsFail(t *testing.T) {
	const lease, every = 30 * time.Second, 9 * time.Second
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		for _, failFrom := range []int{1, 2} {
			t.Run(fmt.Sprintf("failFrom=%d", failFrom), func(t *testing.T) {
				clk := clock.NewManual(time.Now())
				ticks := make(chan time.Time)
				s := &throttledRenewals{Store: v.s, failFrom: failFrom,
					arm:  func() { v.f.FailNext("UpdateItem", 100, dynamotest.Throttle()) },
					took: func() { clk.Advance(every) }}
				t.Cleanup(v.f.Clear)
				fired := v.f.Fired()
				g, err := idem.New(idem.Config{
					Tenant: idem.AuthorizerKey("tenantId"),
					Store:  s,
					Lease:  lease, Heartbeat: every,
					Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now,
						NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }}},
					Wait:   -1,
					Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
				})
				if err != nil {
					t.Fatal(err)
				}
				key := newKey()
				var firstCtx context.Context
				second := &countingHandler{before: func(context.Context, int32) {
					if firstCtx.Err() == nil {
						t.Errorf("the reclaiming request ran while the first handler's context was live")
					}
				}}
				w2 := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					r, err := second.serve(ctx, ev)
					r.Body = `{"who":"second"}`
					return r, err
				})
				var secondResp events.APIGatewayV2HTTPResponse
				first := &countingHandler{before: func(ctx context.Context, _ int32) {
					firstCtx = ctx
					clk.Advance(every)
					cut := false
					for range 10 {
						select {
						case ticks <- time.Time{}:
							continue
						case <-ctx.Done():
							cut = true
						}
						break
					}
					v.f.Clear()
					if v.f.Fired() == fired {
						t.Errorf("no renewal was throttled")
					}
					until := s.lastUntil()
					if !cut {
						t.Errorf("handler context still live at %s, the last lease written ended at %s", clk.Now(), until)
					} else {
						if cause := context.Cause(ctx); !errors.Is(cause, idem.ErrLeaseLost) {
							t.Errorf("cause %v, want ErrLeaseLost", cause)
						}
						if !clk.Now().Before(until) {
							t.Errorf("cut at %s, not before the last lease written ended (%s)", clk.Now(), until)
						}
					}
					if left := until.Sub(clk.Now()); left > 0 {
						clk.Advance(left)
					}
					secondResp = call(t, w2, guardEvent(key, `{}`))
				}}
				r := call(t, g.HTTPAPI(first.serve), guardEvent(key, `{}`))
				if secondResp.Body != `{"who":"second"}` || second.runs.Load() != 1 {
					t.Fatalf("reclaim answered %+v (%d runs)", secondResp, second.runs.Load())
				}
				if code, _ := envelopeCode(t, r.Body); r.StatusCode != 409 || code != "idempotency_in_flight" {
					t.Fatalf("the cut handler's completion answered %d %s", r.StatusCode, r.Body)
				}
				if rr := call(t, w2, guardEvent(key, `{}`)); rr.Body != `{"who":"second"}` || rr.Headers[idem.HeaderOpenWOPReplay] != "true" || second.runs.Load() != 1 || first.runs.Load() != 1 {
					t.Fatalf("replay %+v (runs %d/%d)", rr, first.runs.Load(), second.runs.Load())
				}
			})
		}
	})
}
