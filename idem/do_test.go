package idem_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// countingStore counts the round trips a Guard makes to its store.
type countingStore struct {
	idem.Store
	n atomic.Int32
}

func (s *countingStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	s.n.Add(1)
	return s.Store.Claim(ctx, rec, now)
}
func (s *countingStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.n.Add(1)
	return s.Store.Complete(ctx, claim, out, now)
}
func (s *countingStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	s.n.Add(1)
	return s.Store.Release(ctx, claim, now)
}
func (s *countingStore) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	s.n.Add(1)
	return s.Store.Renew(ctx, id, owner, leaseExpires, now)
}
func (s *countingStore) Delete(ctx context.Context, id, owner string, now time.Time) error {
	s.n.Add(1)
	return s.Store.Delete(ctx, id, owner, now)
}
func (s *countingStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	s.n.Add(1)
	return s.Store.Get(ctx, id, now)
}

// TestDoRunsParallelDuplicatesOnce: many concurrent calls of Do with one
// key and one request run fn once; every other call gets its response
// replayed (waiting for it), and a first execution costs two store round
// trips, a replay one, as Do's doc states.
func TestDoRunsParallelDuplicatesOnce(t *testing.T) {
	var cs *countingStore
	e := newEnv(t, func(c *idem.Config) {
		cs = &countingStore{Store: c.Store}
		c.Store, c.Wait = cs, 10*time.Second
	})
	var runs atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		if _, ok := idem.FromContext(ctx); !ok {
			t.Error("fn runs without the claim in its context")
		}
		<-release
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"run":"1"}`}, nil
	}
	const n = 16
	var wg sync.WaitGroup
	out := make([]events.APIGatewayV2HTTPResponse, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.guard.Do(context.Background(), idem.Request{Event: v2event("POST", "POST /runs", testKey, `{"a":1}`)}, fn)
			if err != nil {
				t.Errorf("Do returned an error: %v", err)
			}
			out[i] = r
		}()
	}
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times for %d duplicates, want once", runs.Load(), n)
	}
	replays := 0
	for _, r := range out {
		if r.StatusCode != 201 || r.Body != `{"run":"1"}` {
			t.Fatalf("a duplicate got %d %s, want the first response", r.StatusCode, r.Body)
		}
		if r.Headers[idem.HeaderOpenWOPReplay] == "true" {
			replays++
		}
	}
	if replays != n-1 {
		t.Fatalf("%d replays, want %d", replays, n-1)
	}

	// Round trips: a fresh key costs two, its replay one.
	before := cs.n.Load()
	ev := v2event("POST", "POST /runs", "k_fresh_0123456789abcdefgh", `{}`)
	release2 := func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{}`}, nil
	}
	if _, err := e.guard.Do(context.Background(), idem.Request{Event: ev}, release2); err != nil {
		t.Fatal(err)
	}
	if got := cs.n.Load() - before; got != 2 {
		t.Fatalf("a first execution cost %d round trips, want 2", got)
	}
	before = cs.n.Load()
	if _, err := e.guard.Do(context.Background(), idem.Request{Event: ev}, release2); err != nil {
		t.Fatal(err)
	}
	if got := cs.n.Load() - before; got != 1 {
		t.Fatalf("a replay cost %d round trips, want 1", got)
	}
}

// TestDoScopesByRouteTemplateWithParamsInFingerprint: a handler that
// routes by itself passes the route template as the operation and the path
// parameters as values; one key is one record per route, so the same key
// on another resource of the route (another run's cancel) is 409
// idempotency_key_mismatch and fn does not run again, while the same key on
// the same resource replays.
func TestDoScopesByRouteTemplateWithParamsInFingerprint(t *testing.T) {
	e := newEnv(t, nil)
	var runs atomic.Int32
	fn := func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
		runs.Add(1)
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"ok":true}`}, nil
	}
	const op = "POST /runs/{runId}/cancel"
	do := func(run string) events.APIGatewayV2HTTPResponse {
		ev := v2event("POST", "$default", testKey, `{}`)
		ev.RawPath = "/runs/" + run + "/cancel"
		r, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: op, Params: map[string]string{"runId": run}}, fn)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := do("acme~2Fr1"); r.StatusCode != 200 || runs.Load() != 1 {
		t.Fatalf("first: %d, %d runs", r.StatusCode, runs.Load())
	}
	if r := do("acme~2Fr2"); r.StatusCode != 409 || !strings.Contains(r.Body, "idempotency_key_mismatch") || runs.Load() != 1 {
		t.Fatalf("same key on another run: %d %s, %d runs (want 409 idempotency_key_mismatch, nothing run)", r.StatusCode, r.Body, runs.Load())
	}
	if r := do("acme~2Fr1"); r.StatusCode != 200 || r.Headers[idem.HeaderOpenWOPReplay] != "true" || runs.Load() != 1 {
		t.Fatalf("same key, same run: %d %v, %d runs (want a replay)", r.StatusCode, r.Headers, runs.Load())
	}
}
