package dynamostore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// renewHook arms faults ahead of the next Renew and reports each Renew's
// result.
type renewHook struct {
	idem.Store
	arm     func()
	renewed chan error
}

func (s *renewHook) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	if f := s.arm; f != nil {
		s.arm = nil
		f()
	}
	err := s.Store.Renew(ctx, id, owner, leaseExpires, now)
	s.renewed <- err
	return err
}

// The heartbeat's Renew (a conditional UpdateItem on the owner) is
// applied and its answer lost: the owner keeps its lease (the renewal
// succeeds, the handler's context is not cut, a same-key request inside
// the renewed lease is in flight, not a reclaim); when the SDK gives up
// (lost, then throttled) the renewal is an error but not a fence, and the
// lease it wrote still holds. Once the owner stops renewing and the lease
// ends, a same-key request reclaims; the stale owner's completion is then
// fenced and never replaces the new owner's response.
func TestLostAnswerRenew(t *testing.T) {
	const lease, every = 30 * time.Second, 9 * time.Second
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		for _, c := range dynamotest.Losses("UpdateItem") {
			t.Run(c.Name, func(t *testing.T) {
				t.Cleanup(v.f.Clear)
				clk := clock.NewManual(time.Now())
				ticks := make(chan time.Time)
				s := &renewHook{Store: v.s, arm: func() { c.Arm(v.f) }, renewed: make(chan error, 4)}
				guard := func(st idem.Store, tk func(time.Duration) (<-chan time.Time, func())) *idem.Guard {
					g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: st, Lease: lease, Heartbeat: every, Wait: -1,
						Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now, NewTickerFunc: tk}},
						Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
					if err != nil {
						t.Fatal(err)
					}
					return g
				}
				g1 := guard(s, func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} })
				g2 := guard(v.s, nil)
				key := newKey()
				second := &countingHandler{}
				w2 := g2.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					r, err := second.serve(ctx, ev)
					r.Body = `{"who":"second"}`
					return r, err
				})
				first := &countingHandler{before: func(ctx context.Context, _ int32) {
					clk.Advance(every)
					ticks <- clk.Now()
					var err error
					select {
					case err = <-s.renewed:
					case <-time.After(2 * time.Minute):
						t.Fatal("no renewal")
					}
					if v.f.Pending() != 0 {
						t.Errorf("faults pending %d", v.f.Pending())
					}
					if c.Landed && err != nil {
						t.Errorf("renewal whose answer was lost: %v; want success", err)
					}
					if errors.Is(err, idem.ErrFenced) {
						t.Errorf("renewal reported fenced: %v", err)
					}
					if ctx.Err() != nil {
						t.Errorf("handler context ended after the renewal: %v", context.Cause(ctx))
					}
					// Past the claim's lease, inside the renewed one.
					clk.Advance(lease - every + 4*time.Second)
					r := call(t, w2, guardEvent(key, `{}`))
					if code, _ := envelopeCode(t, r.Body); r.StatusCode != 409 || code != "idempotency_in_flight" || second.runs.Load() != 0 {
						t.Errorf("same-key request inside the renewed lease: %d %s (second ran %d); want 409 in flight", r.StatusCode, r.Body, second.runs.Load())
					}
					// The owner stops renewing (paused); its lease ends;
					// a same-key request reclaims and completes.
					clk.Advance(every)
					if r := call(t, w2, guardEvent(key, `{}`)); r.Body != `{"who":"second"}` || second.runs.Load() != 1 {
						t.Errorf("reclaim after the renewed lease: %d %s (runs %d)", r.StatusCode, r.Body, second.runs.Load())
					}
				}}
				r := call(t, g1.HTTPAPI(first.serve), guardEvent(key, `{}`))
				if code, _ := envelopeCode(t, r.Body); r.StatusCode != 409 || code != "idempotency_in_flight" {
					t.Fatalf("the stale owner's completion answered %d %s; want it fenced (409 in flight)", r.StatusCode, r.Body)
				}
				if rr := call(t, w2, guardEvent(key, `{}`)); rr.Body != `{"who":"second"}` || rr.Headers[idem.HeaderOpenWOPReplay] != "true" || first.runs.Load() != 1 || second.runs.Load() != 1 {
					t.Fatalf("replay %d %s (runs %d/%d); want the second's response", rr.StatusCode, rr.Body, first.runs.Load(), second.runs.Load())
				}
			})
		}
	})
}
