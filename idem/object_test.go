package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// action is a test object whose status a test moves.
type action struct {
	mu     sync.Mutex
	status string
	loads  atomic.Int32
	// settleAfter, when > 0, settles the action as "completed" on that load.
	settleAfter int32
}

func (a *action) set(s string) { a.mu.Lock(); a.status = s; a.mu.Unlock() }

func (a *action) load(_ context.Context, first idem.ClaimInfo, _ *idem.Response) (idem.ObjectState, error) {
	n := a.loads.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.settleAfter > 0 && n >= a.settleAfter {
		a.status = "completed"
	}
	b, _ := json.Marshal(map[string]string{"actionId": "a-1", "status": a.status, "claim": first.ID})
	return idem.ObjectState{Response: &idem.Response{Status: 200, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: b},
		Settled: a.status != "pending"}, nil
}

func commerceGuard(t *testing.T, wait time.Duration) *env {
	return newEnv(t, func(c *idem.Config) { c.Policy, c.Wait = commerce.Policy, wait })
}

func doAction(t *testing.T, e *env, a *action, mode string, runs *atomic.Int32) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	ev := commerceEvent("POST", "POST /actions", "cart-42", `{"sku":"font-1"}`)
	if mode != "" {
		ev.Headers["idempotency-mode"] = mode
	}
	r, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Object: a.load}, func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "Location": "/actions/a-1"},
			Body: `{"actionId":"a-1","status":"pending"}`}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	return r, m
}

// TestCommerceReplayRendersTheActionInItsFinalStatus: under the commerce
// policy a key binds one Action: a replay of a settled Action answers that
// Action as it is now (the first answer's status and headers, its current
// body), marked Idempotent-Replayed, and a failed Action replays as
// failed; the Verb never runs again.
func TestCommerceReplayRendersTheActionInItsFinalStatus(t *testing.T) {
	e := commerceGuard(t, -1)
	a := &action{status: "pending"}
	var runs atomic.Int32
	if r, m := doAction(t, e, a, "", &runs); r.StatusCode != 201 || m["status"] != "pending" {
		t.Fatalf("first: %d %v", r.StatusCode, m)
	}
	a.set("failed")
	r, m := doAction(t, e, a, "", &runs)
	if r.StatusCode != 201 || m["status"] != "failed" || r.Headers[commerce.HeaderIdempotentReplay] != "true" ||
		r.Headers["Location"] != "/actions/a-1" || runs.Load() != 1 {
		t.Fatalf("replay of a failed action: %d %v %v, %d runs (want 201, status failed, replayed, one run)", r.StatusCode, r.Headers, m, runs.Load())
	}
	// The OpenWOP default replays the stored response, Object or not.
	o := newEnv(t, func(c *idem.Config) { c.Wait = -1 })
	ev := v2event("POST", "POST /actions", testKey, `{}`)
	fn := func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"status":"pending"}`}, nil
	}
	_, _ = o.guard.Do(context.Background(), idem.Request{Event: ev, Object: a.load}, fn)
	if r, _ := o.guard.Do(context.Background(), idem.Request{Event: v2event("POST", "POST /actions", testKey, `{}`), Object: a.load}, fn); r.Body != `{"status":"pending"}` {
		t.Fatalf("OpenWOP replay rendered the object: %s", r.Body)
	}
}

// TestCommercePendingActionWaitsAsItsModeSays: a replay of an Action
// still pending waits as Idempotency-Mode says: async answers the pending
// Action at once (202, Retry-After, the Action's body, not a bare request
// id); sync waits until it settles and answers it settled; sync with a
// budget that ends first answers the pending Action with Retry-After.
func TestCommercePendingActionWaitsAsItsModeSays(t *testing.T) {
	var runs atomic.Int32
	e := commerceGuard(t, 10*time.Second)
	a := &action{status: "pending"}
	doAction(t, e, a, "", &runs)
	r, m := doAction(t, e, a, "async", &runs)
	if r.StatusCode != 202 || m["status"] != "pending" || m["actionId"] != "a-1" || r.Headers["Retry-After"] == "" ||
		r.Headers[commerce.HeaderIdempotentReplay] != "true" {
		t.Fatalf("async replay of a pending action: %d %v %v", r.StatusCode, r.Headers, m)
	}
	a.settleAfter = a.loads.Load() + 3
	r, m = doAction(t, e, a, "sync", &runs)
	if r.StatusCode != 201 || m["status"] != "completed" || r.Headers["Retry-After"] != "" {
		t.Fatalf("sync replay of a pending action: %d %v %v (want it waited on until completed)", r.StatusCode, r.Headers, m)
	}

	short := commerceGuard(t, 30*time.Millisecond)
	b := &action{status: "pending"}
	doAction(t, short, b, "", &runs)
	r, m = doAction(t, short, b, "", &runs)
	if r.StatusCode != 202 || m["status"] != "pending" || r.Headers["Retry-After"] == "" {
		t.Fatalf("sync replay past its budget: %d %v %v (want the pending action with Retry-After)", r.StatusCode, r.Headers, m)
	}
	if runs.Load() != 2 {
		t.Fatalf("%d runs, want 2 (one per guard)", runs.Load())
	}
}
