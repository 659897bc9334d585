package dynamostore_test

// The commerce platform's policy, behaviour by behaviour, through the Guard
// on DynamoDB (every engine). Each test is named after the behaviour it
// proves.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// commerceGuard is a Guard under the commerce policy on st.
func commerceGuard(t *testing.T, st idem.Store, clk *clock.Manual, mod func(*idem.Config)) *idem.Guard {
	t.Helper()
	cfg := idem.Config{
		Policy: commerce.Policy,
		Tenant: idem.AuthorizerKey("tenantId"),
		Store:  st,
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
		Wait:   -1,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// commerceEvent is a request of worker in namespace ns (both from the
// authorizer context, as the credential carries them).
func commerceEvent(ns, worker, route, key, body string) events.APIGatewayV2HTTPRequest {
	ev := guardEvent(key, body)
	ev.RouteKey = route
	ctx := ev.RequestContext.Authorizer.Lambda
	if ns != "" {
		ctx["namespace"] = ns
	}
	if worker != "" {
		ctx["worker"] = worker
	}
	return ev
}

// cartKey is a commerce key the OpenWOP grammar refuses: non-ASCII, a comma
// and inner spaces.
func cartKey() string { return "cart ✓ " + rnd(6) + ", checkout" }

func envelopeCode(t *testing.T, body string) (string, map[string]any) {
	t.Helper()
	var env struct {
		Error   string         `json:"error"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("not an envelope: %q", body)
	}
	return env.Error, env.Details
}

// TestCommerceKeyScopedByNamespaceAndWorker: a key belongs to one namespace
// and one calling worker, both from the credential: the same key sent by
// two workers (or in two namespaces) names two actions, and a credential
// without them is 401 and records nothing.
func TestCommerceKeyScopedByNamespaceAndWorker(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := commerceGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		w := g.HTTPAPI(h.serve)
		key := cartKey()
		a := call(t, w, commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`))
		b := call(t, w, commerceEvent("ns-1", "billing", "POST /orders", key, `{"cart":1}`))
		c := call(t, w, commerceEvent("ns-2", "checkout", "POST /orders", key, `{"cart":1}`))
		if a.StatusCode != 201 || b.StatusCode != 201 || c.StatusCode != 201 || h.runs.Load() != 3 {
			t.Fatalf("three workers/namespaces, one key: %d %d %d, %d runs", a.StatusCode, b.StatusCode, c.StatusCode, h.runs.Load())
		}
		again := call(t, w, commerceEvent("ns-1", "billing", "POST /orders", key, `{"cart":1}`))
		if again.Body != b.Body || again.Headers["Idempotent-Replayed"] != "true" || h.runs.Load() != 3 {
			t.Fatalf("the worker's own retry: %+v", again)
		}
		for _, ev := range []events.APIGatewayV2HTTPRequest{
			commerceEvent("", "checkout", "POST /orders", cartKey(), `{}`),
			commerceEvent("ns-1", "", "POST /orders", cartKey(), `{}`),
		} {
			v.cnt.Reset()
			if r := call(t, w, ev); r.StatusCode != 401 {
				t.Fatalf("credential without namespace or worker: %d %s", r.StatusCode, r.Body)
			}
			if n := v.cnt.Total(); n != 0 {
				t.Fatalf("a request rejected for its credential cost %d round trips", n)
			}
		}
		if h.runs.Load() != 3 {
			t.Fatalf("runs %d", h.runs.Load())
		}
	})
}

// TestCommerceKeyBindsOperationAndInput: the key binds the operation and a
// fingerprint of the input: the same key on a different operation or with
// a different input is 409 idempotency-mismatch, and nothing runs.
func TestCommerceKeyBindsOperationAndInput(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := commerceGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		w := g.HTTPAPI(h.serve)
		key := cartKey()
		if r := call(t, w, commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)); r.StatusCode != 201 {
			t.Fatalf("first: %d", r.StatusCode)
		}
		for name, ev := range map[string]events.APIGatewayV2HTTPRequest{
			"operation": commerceEvent("ns-1", "checkout", "POST /refunds", key, `{"cart":1}`),
			"input":     commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":2}`),
		} {
			r := call(t, w, ev)
			code, details := envelopeCode(t, r.Body)
			if r.StatusCode != 409 || code != commerce.CodeIdempotencyMismatch || details["openwopCode"] != "idempotency_key_mismatch" {
				t.Fatalf("another %s: %d %s", name, r.StatusCode, r.Body)
			}
			if r.Headers["Idempotent-Replayed"] != "" {
				t.Fatalf("a mismatch is not a replay: %v", r.Headers)
			}
		}
		if h.runs.Load() != 1 {
			t.Fatalf("a mismatch ran the handler: %d runs", h.runs.Load())
		}
	})
}

// blocking is a handler that holds its first execution until released.
type blocking struct {
	countingHandler
	entered, release chan struct{}
	once             sync.Once
}

func newBlocking() *blocking {
	b := &blocking{entered: make(chan struct{}), release: make(chan struct{})}
	b.before = func(_ context.Context, n int32) {
		if n == 1 {
			b.once.Do(func() { close(b.entered) })
			<-b.release
		}
	}
	return b
}

// TestCommerceSyncDuplicateWaitsForPendingAction: a second request (mode
// sync, or no mode) while the first is pending waits for it within its
// budget and gets the first action's final answer, replayed; the handler
// runs once.
func TestCommerceSyncDuplicateWaitsForPendingAction(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := &claimSignal{Store: v.s, claimed: make(chan struct{}, 8)}
		g := commerceGuard(t, st, clk, func(c *idem.Config) { c.Wait = time.Minute })
		h := newBlocking()
		w := g.HTTPAPI(h.serve)
		key := cartKey()
		first := make(chan events.APIGatewayV2HTTPResponse, 1)
		go func() { first <- call(t, w, commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)) }()
		<-h.entered
		var dups []chan events.APIGatewayV2HTTPResponse
		for _, mode := range []string{"", "SYNC"} {
			ev := commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)
			if mode != "" {
				ev.Headers[commerce.HeaderMode] = mode
			}
			c := make(chan events.APIGatewayV2HTTPResponse, 1)
			go func() { c <- call(t, w, ev) }()
			dups = append(dups, c)
		}
		// Release the first only once both duplicates found it pending
		// (their claims returned): they are waiting on it.
		for range 3 {
			<-st.claimed
		}
		close(h.release)
		for _, c := range dups {
			checkSyncReplay(t, <-c)
		}
		if r := <-first; r.StatusCode != 201 {
			t.Fatalf("first: %d", r.StatusCode)
		}
		if h.runs.Load() != 1 {
			t.Fatalf("runs %d", h.runs.Load())
		}
	})
}

// claimSignal signals every Claim that returned.
type claimSignal struct {
	idem.Store
	claimed chan struct{}
}

func (s *claimSignal) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, rec, now)
	s.claimed <- struct{}{}
	return res, err
}

func checkSyncReplay(t *testing.T, r events.APIGatewayV2HTTPResponse) {
	t.Helper()
	if r.StatusCode != 201 || r.Body != `{"execution":1}` || r.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("a sync duplicate: %d %s %v", r.StatusCode, r.Body, r.Headers)
	}
}

// TestCommerceAsyncDuplicateGetsPendingAction: a second request with
// Idempotency-Mode: async while the first is pending is answered at once,
// 202 with the pending action (the first request's id) and Retry-After;
// nothing runs; once the first settles the key replays its answer. A bad
// mode is 400 and records nothing.
func TestCommerceAsyncDuplicateGetsPendingAction(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := commerceGuard(t, v.s, clk, func(c *idem.Config) { c.Wait = time.Hour })
		h := newBlocking()
		w := g.HTTPAPI(h.serve)
		key := cartKey()
		firstEv := commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)
		first := make(chan events.APIGatewayV2HTTPResponse, 1)
		go func() { first <- call(t, w, firstEv) }()
		<-h.entered
		ev := commerceEvent("ns-1", "checkout", "POST /orders", key, `{"cart":1}`)
		ev.Headers["idempotency-mode"] = "async"
		r := call(t, w, ev) // the wait would be an hour: async answers at once
		var pending map[string]string
		if err := json.Unmarshal([]byte(r.Body), &pending); err != nil || r.StatusCode != 202 ||
			pending["status"] != "pending" || pending["requestId"] != firstEv.RequestContext.RequestID ||
			r.Headers["Retry-After"] == "" || r.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("async duplicate: %d %s %v", r.StatusCode, r.Body, r.Headers)
		}
		close(h.release)
		if f := <-first; f.StatusCode != 201 {
			t.Fatalf("first: %d", f.StatusCode)
		}
		if r := call(t, w, ev); r.StatusCode != 201 || r.Body != `{"execution":1}` {
			t.Fatalf("async after the first settled: %d %s", r.StatusCode, r.Body)
		}
		// An empty value is a value, refused as an empty Idempotency-Key
		// is (a present, invalid key), never read as the default sync.
		for _, mode := range []string{"later", ""} {
			bad := commerceEvent("ns-1", "checkout", "POST /orders", cartKey(), `{"cart":1}`)
			bad.Headers["Idempotency-Mode"] = mode
			v.cnt.Reset()
			r = call(t, w, bad)
			if code, d := envelopeCode(t, r.Body); r.StatusCode != 400 || code != "validation_error" || d["field"] != commerce.HeaderMode || v.cnt.Total() != 0 {
				t.Fatalf("mode %q: %d %s, %d round trips", mode, r.StatusCode, r.Body, v.cnt.Total())
			}
		}
		if h.runs.Load() != 1 {
			t.Fatalf("runs %d", h.runs.Load())
		}
	})
}

// TestCommerceRejectedAtTheDoorRecordsNothing: a first request answered
// 400, 401, 403 or 429 leaves no record: the same key with the same input
// then runs fresh.
func TestCommerceRejectedAtTheDoorRecordsNothing(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		for _, status := range []int{400, 401, 403, 429} {
			st := spy(v.s)
			g := commerceGuard(t, st, clk, nil)
			h := &countingHandler{status: status}
			w := g.HTTPAPI(h.serve)
			ev := commerceEvent("ns-1", "checkout", "POST /orders", cartKey(), `{"cart":1}`)
			if r := call(t, w, ev); r.StatusCode != status {
				t.Fatalf("%d: answered %d", status, r.StatusCode)
			}
			st.mu.Lock()
			id := st.lastID
			st.mu.Unlock()
			if _, found, err := v.s.Get(ctxT(t), id, clk.Now()); err != nil || found {
				t.Fatalf("%d left a record (%v, %v)", status, found, err)
			}
			h.status = 201
			if r := call(t, w, ev); r.StatusCode != 201 || r.Headers["Idempotent-Replayed"] != "" || h.runs.Load() != 2 {
				t.Fatalf("after %d the key did not run fresh: %d, %d runs", status, r.StatusCode, h.runs.Load())
			}
		}
	})
}

// TestCommerceFailedActionReplaysAsFailed: a final failure, a 5xx included,
// is stored and replayed as failed with Idempotent-Replayed: true; the key
// never runs the handler again.
func TestCommerceFailedActionReplaysAsFailed(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := commerceGuard(t, v.s, clk, nil)
		for _, status := range []int{500, 503, 422} {
			h := &countingHandler{status: status}
			w := g.HTTPAPI(h.serve)
			ev := commerceEvent("ns-1", "checkout", "POST /orders", cartKey(), `{"cart":1}`)
			first := call(t, w, ev)
			if first.StatusCode != status || first.Headers["Idempotent-Replayed"] != "" {
				t.Fatalf("%d first: %+v", status, first)
			}
			h.status = 201 // the failure would not happen again: the key still does not retry
			for range 2 {
				r := call(t, w, ev)
				if r.StatusCode != status || r.Body != first.Body || r.Headers["Idempotent-Replayed"] != "true" {
					t.Fatalf("%d replay: %d %s %v", status, r.StatusCode, r.Body, r.Headers)
				}
			}
			if h.runs.Load() != 1 {
				t.Fatalf("%d: the key ran %d times", status, h.runs.Load())
			}
		}
	})
}

// TestCommerceKeysKeptForever: records carry no expiry; a replay a year
// later still returns the first action, and the retention sweeper, run a
// century later, deletes none of them.
func TestCommerceKeysKeptForever(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := commerceGuard(t, st, clk, nil)
		if g.Config().Retention != idem.Forever {
			t.Fatalf("retention %s", g.Config().Retention)
		}
		h := &countingHandler{}
		w := g.HTTPAPI(h.serve)
		ev := commerceEvent("ns-1", "checkout", "POST /orders", cartKey(), `{"cart":1}`)
		first := call(t, w, ev)
		rec := st.last(t, clk.Now())
		if !rec.Expires.IsZero() {
			t.Fatalf("a commerce record expires at %s", rec.Expires)
		}
		item := v.raw(t, rec.ID)
		if _, ok := item["expiresAt"]; ok {
			t.Fatalf("a commerce record carries the TTL attribute: %v", item)
		}
		res, err := (&sweeper.Sweeper{API: v.e.Client(), Table: v.table}).SweepUntil(ctxT(t), clk.Now().AddDate(100, 0, 0), nil)
		if err != nil || res.Expired != 0 || !res.Complete {
			t.Fatalf("sweep a century later: %+v %v", res, err)
		}
		clk.Advance(365 * 24 * time.Hour)
		r := call(t, w, ev)
		if r.Body != first.Body || r.Headers["Idempotent-Replayed"] != "true" || h.runs.Load() != 1 {
			t.Fatalf("a year later: %d %s %v", r.StatusCode, r.Body, r.Headers)
		}
	})
}

// TestCommerceKeyBindsTheBodysMediaType: on DynamoDB, one key on the same
// bytes sent as a JSON Patch and then as a JSON merge patch (or as a form
// and then as text) is 409 with the policy's mismatch code, never the
// first one's answer replayed, and the same merge patch respaced with its
// media type spelt otherwise is the replay (RED_TEAM 313).
func TestCommerceKeyBindsTheBodysMediaType(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := commerceGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		w := g.HTTPAPI(h.serve)
		send := func(key, contentType, body string) events.APIGatewayV2HTTPResponse {
			ev := commerceEvent("ns-1", "checkout", "PATCH /carts/{id}", key, body)
			ev.RequestContext.HTTP.Method = "PATCH"
			ev.PathParameters = map[string]string{"id": "c1"}
			ev.Headers["content-type"] = contentType
			return call(t, w, ev)
		}
		const patch = `[{"op":"remove","path":"/a"}]`
		for _, c := range []struct{ first, second, body string }{
			{"application/json-patch+json", "application/merge-patch+json", patch},
			{"application/x-www-form-urlencoded", "text/plain", "a=1"},
		} {
			key := cartKey()
			if r := send(key, c.first, c.body); r.StatusCode != 201 {
				t.Fatalf("first %s: %d %s", c.first, r.StatusCode, r.Body)
			}
			r := send(key, c.second, c.body)
			code, _ := envelopeCode(t, r.Body)
			if r.StatusCode != 409 || code != commerce.CodeIdempotencyMismatch || r.Headers["Idempotent-Replayed"] != "" {
				t.Fatalf("%s then %s: %d %v %s; want 409 %s", c.first, c.second, r.StatusCode, r.Headers, r.Body, commerce.CodeIdempotencyMismatch)
			}
		}
		if h.runs.Load() != 2 {
			t.Fatalf("handler ran %d times, want 2", h.runs.Load())
		}
		key := cartKey()
		first := send(key, "application/merge-patch+json", `{"a":null,"b":1}`)
		again := send(key, "Application/Merge-Patch+JSON; charset=utf-8", ` {"b": 1, "a": null}`)
		if first.StatusCode != 201 || again.Headers["Idempotent-Replayed"] != "true" || again.Body != first.Body {
			t.Fatalf("the same merge patch again: %d %v %s; want the replay of %d %s", again.StatusCode, again.Headers, again.Body, first.StatusCode, first.Body)
		}
	})
}
