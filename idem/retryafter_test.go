package idem_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// inFlightRetryAfter starts a request that blocks, lets between run while it
// is in flight, sends a duplicate and returns the duplicate's Retry-After.
func inFlightRetryAfter(t *testing.T, e *env, ctx context.Context, between func()) string {
	t.Helper()
	release, started, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h := &handler{block: release, before: func(context.Context) { close(started) }}
	go func() {
		defer close(done)
		if _, err := e.guard.HTTPAPI(h.v2)(ctx, v2event("POST", "POST /runs", testKey, `{}`)); err != nil {
			t.Error(err)
		}
	}()
	<-started
	if between != nil {
		between()
	}
	r := e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{}`))
	close(release)
	<-done
	if code, _ := envelope(t, r.Body); r.StatusCode != 409 || code != "idempotency_in_flight" && code != erp.CodeRequestInProgress {
		t.Fatalf("duplicate: %+v", r)
	}
	return r.Headers["Retry-After"]
}

// While the owner is alive — its heartbeat keeps writing the lease — a
// duplicate is told to poll again soon (<= 2 s), however long the request
// has been running; the lease's remaining time is for owners that look dead.
func TestRetryAfterLiveOwnerIsShort(t *testing.T) {
	t.Run("heartbeat renews", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Heartbeat = 5 * time.Millisecond })
		ra := inFlightRetryAfter(t, e, context.Background(), func() {
			e.clock.Advance(250 * time.Second) // far past two heartbeats since the claim...
			n := e.store.Calls()["Renew"]
			for e.store.Calls()["Renew"] < n+2 { // ...but the owner renews at the new time
				time.Sleep(time.Millisecond)
			}
		})
		if ra != "1" {
			t.Fatalf("Retry-After %q under a live owner, want 1", ra)
		}
	})
	t.Run("no heartbeat: looks dead", func(t *testing.T) {
		e := newEnv(t, nil) // heartbeat 100 s of real time: never fires here
		ra := inFlightRetryAfter(t, e, context.Background(), func() { e.clock.Advance(250 * time.Second) })
		if ra != "50" { // lease 300 s from the claim
			t.Fatalf("Retry-After %q for an owner that stopped renewing, want the remaining lease 50", ra)
		}
	})
	t.Run("inside Lambda", func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "aws-1"})
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		ra := inFlightRetryAfter(t, e, ctx, func() { e.clock.Advance(8 * time.Second) })
		if ra != "1" {
			t.Fatalf("Retry-After %q 8 s into a Lambda invocation, want 1", ra)
		}
	})
	t.Run("configured", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.InFlightRetryAfter = 1500 * time.Millisecond })
		if ra := inFlightRetryAfter(t, e, context.Background(), nil); ra != "2" {
			t.Fatalf("Retry-After %q, want 2 (1.5 s rounded up)", ra)
		}
	})
	t.Run("ERP policy", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Policy = erp.Policy })
		if ra := inFlightRetryAfter(t, e, context.Background(), func() { e.clock.Advance(250 * time.Second) }); ra != "2" {
			t.Fatalf("ERP Retry-After %q, want 2", ra)
		}
	})
}

func TestInFlightRetryAfterValidated(t *testing.T) {
	for _, d := range []time.Duration{time.Millisecond, -time.Second, 2 * time.Minute} {
		_, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Tenant: idem.SingleTenant("t"), InFlightRetryAfter: d})
		if err == nil || !strings.Contains(err.Error(), "InFlightRetryAfter") {
			t.Fatalf("InFlightRetryAfter %s accepted: %v", d, err)
		}
	}
	g, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Tenant: idem.SingleTenant("t"), Policy: erp.Policy})
	if err != nil || g.Config().InFlightRetryAfter != 2*time.Second {
		t.Fatalf("ERP default: %v %v", g.Config().InFlightRetryAfter, err)
	}
}
