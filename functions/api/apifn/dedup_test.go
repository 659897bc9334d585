package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// dedupKey is the i-th distinct Idempotency-Key of a dedup case.
func dedupKey(name string, i int) string {
	return "k-dedup-" + name + "-" + strconv.Itoa(1000000000000+i)
}

// enforced is a createRun of tenant under key with `OpenWOP-Dedup: enforce`
// and scopeId scope.
func enforced(tenant, key, scope string) events.APIGatewayV2HTTPRequest {
	e := ev("POST", "/runs", tenant, key, `{"workflowId":"conformance-noop","scopeId":`+strconv.Quote(scope)+`}`)
	e.Headers["openwop-dedup"] = "enforce"
	return e
}

// wantHeld requires the 409 run_already_active answer: the closed error
// envelope, Retry-After in whole seconds.
func wantHeld(t *testing.T, what string, r events.APIGatewayV2HTTPResponse) {
	t.Helper()
	if r.StatusCode != http.StatusConflict || r.Headers["Retry-After"] != "5" {
		t.Fatalf("%s: %d %v %s, want 409 with Retry-After 5", what, r.StatusCode, r.Headers, r.Body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil || m["error"] != "run_already_active" {
		t.Fatalf("%s: body %s", what, r.Body)
	}
}

// dedupStores runs fn over the memory store and, on every emulator,
// DynamoRuns with its Layer-1 records in idem/dynamostore on the same
// endpoint: with conditional writes on every engine, and with the run
// committed in the completion transaction where the engine has them.
func dedupStores(t *testing.T, fn func(t *testing.T, f *fixture, cnt *dynamotest.Counter)) {
	t.Run("memory", func(t *testing.T) { fn(t, hostOf(t, runs.NewMemRuns(), idem.Config{}, nil), nil) })
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			cnt := dynamotest.NewCounter()
			c := e.Client(dynamotest.FastRetries, cnt.Middleware())
			store, st := dynamoStores(t, e, c, transactional)
			fn(t, hostOf(t, store, idem.Config{Store: st}, nil), cnt)
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}

// TestDedupEnforce: createRun with `OpenWOP-Dedup: enforce` and a scopeId
// creates at most one live run per (tenant, scopeId), on every store.
func TestDedupEnforce(t *testing.T) {
	envelope, err := wireschema.Load(t).Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	dedupStores(t, func(t *testing.T, f *fixture, cnt *dynamotest.Counter) {
		ctx := context.Background()
		// Parallel duplicates under different keys: one 201, seven 409.
		const n = 8
		answers := make([]events.APIGatewayV2HTTPResponse, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := f.h.Handle(ctx, enforced("acme", dedupKey("par", i), "order-7"))
				if err != nil {
					t.Errorf("racer %d: %v", i, err)
				}
				answers[i] = r
			}()
		}
		close(start)
		wg.Wait()
		var holder string
		for i, r := range answers {
			switch r.StatusCode {
			case http.StatusCreated:
				if holder != "" {
					t.Fatalf("two 201s for one scope: %s and %s", holder, r.Body)
				}
				var m map[string]any
				_ = json.Unmarshal([]byte(r.Body), &m)
				holder, _ = m["runId"].(string)
			default:
				wantHeld(t, "racer "+strconv.Itoa(i), r)
				if err := wireschema.Validate(envelope, []byte(r.Body)); err != nil {
					t.Fatalf("409 envelope %s: %v", r.Body, err)
				}
			}
		}
		if holder == "" {
			t.Fatalf("no racer created the run: %v", answers)
		}
		// The key that created the run replays its 201 while it holds the
		// scope.
		for i, r := range answers {
			if r.StatusCode != http.StatusCreated {
				continue
			}
			again, _ := f.do(t, enforced("acme", dedupKey("par", i), "order-7"))
			if again.StatusCode != http.StatusCreated || again.Body != r.Body {
				t.Fatalf("replay of the creating key: %d %s, want %s", again.StatusCode, again.Body, r.Body)
			}
		}
		// Sequential: refused while live; the refusal is not the key's
		// answer, so the same key creates the run once the holder ended.
		loser := dedupKey("seq", 0)
		r, _ := f.do(t, enforced("acme", loser, "order-7"))
		wantHeld(t, "second create while live", r)
		if _, err := f.h.cfg.Runs.Transition(ctx, holder, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		r, m := f.do(t, enforced("acme", loser, "order-7"))
		if r.StatusCode != http.StatusCreated || m["runId"] == holder {
			t.Fatalf("same key after the holder ended: %d %s", r.StatusCode, r.Body)
		}
		wantHeld(t, "third create", func() events.APIGatewayV2HTTPResponse {
			r, _ := f.do(t, enforced("acme", dedupKey("seq", 1), "order-7"))
			return r
		}())
		// Tenants A and B with the same scopeId both create.
		if r, _ := f.do(t, enforced("globex", dedupKey("ten", 0), "order-7")); r.StatusCode != http.StatusCreated {
			t.Fatalf("another tenant's scope: %d %s", r.StatusCode, r.Body)
		}
		// Without the header, or with it and no scopeId: no dedup.
		for i, mk := range []func(int) events.APIGatewayV2HTTPRequest{
			func(i int) events.APIGatewayV2HTTPRequest {
				return ev("POST", "/runs", "acme", dedupKey("nohdr", i), `{"workflowId":"conformance-noop","scopeId":"order-7"}`)
			},
			func(i int) events.APIGatewayV2HTTPRequest {
				e := ev("POST", "/runs", "acme", dedupKey("noscope", i), `{"workflowId":"conformance-noop"}`)
				e.Headers["OpenWOP-Dedup"] = "enforce"
				return e
			},
		} {
			for j := 0; j < 2; j++ {
				if r, _ := f.do(t, mk(j)); r.StatusCode != http.StatusCreated {
					t.Fatalf("unscoped create %d/%d: %d %s", i, j, r.StatusCode, r.Body)
				}
			}
		}
		// Bad input: 400 validation_error naming what to fix.
		for _, c := range []struct {
			hdr, body, field string
		}{
			{"enforce", `{"workflowId":"conformance-noop","scopeId":7}`, "scopeId"},
			{"enforce", `{"workflowId":"conformance-noop","scopeId":""}`, "scopeId"},
			{"enforce", `{"workflowId":"conformance-noop","scopeId":"` + strings.Repeat("x", runs.MaxScopeIDBytes+1) + `"}`, "scopeId"},
			{"always", `{"workflowId":"conformance-noop","scopeId":"s"}`, "OpenWOP-Dedup"},
		} {
			e := ev("POST", "/runs", "acme", dedupKey("bad", 0), c.body)
			e.Headers["OpenWOP-Dedup"] = c.hdr
			r, m := f.do(t, e)
			d, _ := m["details"].(map[string]any)
			if r.StatusCode != 400 || m["error"] != "validation_error" || d["field"] != c.field {
				t.Fatalf("%s %s: %d %s", c.hdr, c.body, r.StatusCode, r.Body)
			}
		}
		if cnt == nil {
			return
		}
		// Round trips: an enforced create of a free scope costs one
		// PutItem (the scope's) more than a create without the header.
		cnt.Reset()
		if r, _ := f.do(t, ev("POST", "/runs", "acme", dedupKey("rt", 0), `{"workflowId":"conformance-noop","scopeId":"rt"}`)); r.StatusCode != 201 {
			t.Fatal(r.Body)
		}
		plain, plainOps := cnt.Total(), cnt.Ops()
		cnt.Reset()
		if r, _ := f.do(t, enforced("acme", dedupKey("rt", 1), "rt")); r.StatusCode != 201 {
			t.Fatal(r.Body)
		}
		scoped, scopedOps := cnt.Total(), cnt.Ops()
		if scoped != plain+1 || scopedOps["PutItem"] != plainOps["PutItem"]+1 {
			t.Fatalf("an enforced create took %d round trips (%v), want a plain create's %d (%v) + one PutItem", scoped, scopedOps, plain, plainOps)
		}
		// A refusal: the claim (PutItem), the scope's PutItem, the holder's
		// GetItem, the record's DeleteItem, and a GetItem of the scope on an
		// engine whose failed condition does not return the item.
		cnt.Reset()
		wantHeld(t, "refusal", func() events.APIGatewayV2HTTPResponse {
			r, _ := f.do(t, enforced("acme", dedupKey("rt", 2), "rt"))
			return r
		}())
		if ops := cnt.Ops(); cnt.Total() > 5 || ops["PutItem"] != 2 || ops["DeleteItem"] != 1 || ops["GetItem"] < 1 || ops["GetItem"] > 2 {
			t.Fatalf("a refused create took %d round trips (%v), want the claim, the scope's write, one or two reads and the delete", cnt.Total(), ops)
		}
	})
}
