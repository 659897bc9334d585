package apifn

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// skewedClock is the system clock moved by a settable offset.
type skewedClock struct {
	clock.System
	off atomic.Int64
}

func (c *skewedClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// TestDedupFencedKeyRetry: a keyed enforced create took its scope and
// stopped before its run was written (its run write failed); past the
// grace another key took the scope over, fencing the first create's run
// id, and that run ended. The first key's retry re-executes under the same
// run id, which can never be written: it is refused (409, forgotten), and
// it does not re-take the scope for that unwritable run, so the scope is
// free at once: the key's next request creates its run, and a third key
// is then refused by it. On every engine, with the run committed by its
// own conditional write and in the completion transaction.
func TestDedupFencedKeyRetry(t *testing.T) {
	dyn := func(transactional bool) func(t *testing.T, e *dynamotest.Emulator) {
		return func(t *testing.T, e *dynamotest.Emulator) {
			ctx := context.Background()
			f, store, clk, faults := faultyHost(t, e, transactional)
			k := dedupKey("fenced", 0)
			// Each request has its own API Gateway request id, as a
			// client's retries do.
			var q requestIDs
			enforced := q.enforced
			// The first execution: the claim and the scope's write land,
			// the run's write does not.
			interruptCreate(t, f, faults, transactional, enforced("acme", k, "order-9"))
			// Past the grace (and the first claim's lease), another key
			// takes the scope over; its run then ends.
			clk.off.Store(int64(runs.ScopeHoldGrace + time.Minute))
			r, m := f.do(t, enforced("acme", dedupKey("fenced", 1), "order-9"))
			if r.StatusCode != http.StatusCreated {
				t.Fatalf("the takeover: %d %s", r.StatusCode, r.Body)
			}
			taker, _ := m["runId"].(string)
			if _, err := store.Transition(ctx, taker, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", clk.Now()); err != nil {
				t.Fatal(err)
			}
			// The first key's retry: its run id is fenced.
			r, _ = f.do(t, enforced("acme", k, "order-9"))
			if r.StatusCode != http.StatusCreated {
				wantHeld(t, "the fenced key's retry", r)
			}
			// The scope is not held by the unwritable run: the key's next
			// request creates (if the retry did not), and a third key is
			// refused by a live run.
			if r.StatusCode != http.StatusCreated {
				if r, _ = f.do(t, enforced("acme", k, "order-9")); r.StatusCode != http.StatusCreated {
					t.Fatalf("the key after its fenced retry: %d %s, want 201 (the scope's holder ended)", r.StatusCode, r.Body)
				}
			}
			wantHeld(t, "a third key", func() events.APIGatewayV2HTTPResponse {
				r, _ := f.do(t, enforced("acme", dedupKey("fenced", 2), "order-9"))
				return r
			}())
		}
	}
	t.Run("conditional", func(t *testing.T) { dynamotest.ForEach(t, dyn(false)) })
	t.Run("transactional", func(t *testing.T) { dynamotest.ForEachWith(t, dynamotest.Transactions, dyn(true)) })
}

// TestDedupScopeIDIsReadLosslessly: a scopeId a JSON decoder would read
// lossily (a lone surrogate escape, bytes that are not UTF-8) is 400
// validation_error under enforce: decoded, distinct scopeIds would become
// one scope (each lone surrogate reads as U+FFFD). A surrogate pair is a
// character, and scopeIds differing in it are distinct scopes.
func TestDedupScopeIDIsReadLosslessly(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{}, nil)
	for i, raw := range []string{`"\ud800"`, `"a\udc00"`, `"\ud800\u0041"`, "\"\xff\"", `"\ud800"x`} {
		for _, key := range []string{dedupKey("lossy", i), ""} {
			e := ev("POST", "/runs", "acme", key, `{"workflowId":"conformance-noop","scopeId":`+raw+`}`)
			e.Headers["OpenWOP-Dedup"] = "enforce"
			r, m := f.do(t, e)
			if r.StatusCode != http.StatusBadRequest || m["error"] != "validation_error" {
				t.Fatalf("scopeId %s (key %q): %d %s, want 400 validation_error", raw, key, r.StatusCode, r.Body)
			}
		}
	}
	for i, raw := range []string{`"\ud83d\ude00"`, `"\ud83d\ude01"`, `"\ufffd"`, "\"\xef\xbf\xbd\\\\ud800\""} {
		e := ev("POST", "/runs", "acme", dedupKey("pair", i), `{"workflowId":"conformance-noop","scopeId":`+raw+`}`)
		e.Headers["OpenWOP-Dedup"] = "enforce"
		if r, _ := f.do(t, e); r.StatusCode != http.StatusCreated && !(i == 3 && r.StatusCode == http.StatusConflict) {
			t.Fatalf("scopeId %s: %d %s, want 201", raw, r.StatusCode, r.Body)
		}
	}
}

// TestDedupRefusalSameKeyRace: while a live run holds the scope, parallel
// requests with ONE Idempotency-Key are each refused (409
// run_already_active, or 409 idempotency_in_flight while a sibling holds
// the claim); none is a replay of a stored 409, and once the holder ended
// the key creates its run, once.
func TestDedupRefusalSameKeyRace(t *testing.T) {
	dedupStores(t, func(t *testing.T, f *fixture, _ *dynamotest.Counter) {
		ctx := context.Background()
		r, m := f.do(t, enforced("acme", dedupKey("hold", 0), "same-key"))
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("the holder: %d %s", r.StatusCode, r.Body)
		}
		holder, _ := m["runId"].(string)
		k := dedupKey("same", 0)
		const n = 6
		answers := make([]events.APIGatewayV2HTTPResponse, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				answers[i], _ = f.h.Handle(ctx, enforced("acme", k, "same-key"))
			}()
		}
		close(start)
		wg.Wait()
		for i, r := range answers {
			var m map[string]any
			_ = json.Unmarshal([]byte(r.Body), &m)
			if r.StatusCode != http.StatusConflict || (m["error"] != "run_already_active" && m["error"] != "idempotency_in_flight") ||
				r.Headers["OpenWOP-Idempotent-Replay"] != "" || r.Headers["Openwop-Idempotent-Replay"] != "" {
				t.Fatalf("same-key racer %d: %d %v %s", i, r.StatusCode, r.Headers, r.Body)
			}
		}
		if _, err := f.h.cfg.Runs.Transition(ctx, holder, []runs.Status{runs.StatusPending}, runs.StatusCompleted, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		r, m = f.do(t, enforced("acme", k, "same-key"))
		if r.StatusCode != http.StatusCreated || m["runId"] == holder {
			t.Fatalf("the key after the holder ended: %d %s", r.StatusCode, r.Body)
		}
		again, _ := f.do(t, enforced("acme", k, "same-key"))
		if again.StatusCode != http.StatusCreated || again.Body != r.Body {
			t.Fatalf("the key's replay: %d %s, want %s", again.StatusCode, again.Body, r.Body)
		}
	})
}

// TestDedupHeaderValues: the header's one value is "enforce" (the OpenAPI
// enum, case-sensitive), surrounding whitespace aside; another case, a
// list (repeated header lines arrive joined by commas) or another token is
// 400 validation_error naming the header, before anything is written. On
// retry and fork the header is not read: they hold no scope.
func TestDedupHeaderValues(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{}, nil)
	for i, c := range []struct {
		val  string
		want int
	}{{"enforce", 201}, {" enforce\t", 409}, {"Enforce", 400}, {"ENFORCE", 400}, {"enforce,enforce", 400}, {"enforce, enforce", 400}, {"", 400}} {
		e := enforced("acme", dedupKey("hdr", i), "hdr")
		e.Headers["openwop-dedup"] = c.val
		r, m := f.do(t, e)
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != c.want || (c.want == 400 && (m["error"] != "validation_error" || d["field"] != HeaderDedup)) {
			t.Fatalf("OpenWOP-Dedup %q: %d %s, want %d", c.val, r.StatusCode, r.Body, c.want)
		}
	}
}

// TestDedupKeyedRunWriteFails: a keyed enforced create whose scope write
// landed and whose run write failed: the key's retry re-executes under
// the same run id, finds the scope its own and answers its run's 201, not
// a 409 from its own scope.
func TestDedupKeyedRunWriteFails(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, faults.Middleware())
		store, st := dynamoStores(t, e, c, false)
		f := hostOf(t, store, idem.Config{Store: st}, nil)
		k := dedupKey("runfail", 0)
		faults.PassNext("PutItem", 2) // the claim, the scope
		faults.FailNext("PutItem", 3, dynamotest.Throttle())
		r, _ := f.h.Handle(ctx, enforced("acme", k, "order-11"))
		faults.Clear()
		if r.StatusCode < 500 {
			t.Fatalf("the failed create answered %d %s", r.StatusCode, r.Body)
		}
		retry := enforced("acme", k, "order-11")
		retry.RequestContext.RequestID = "req-retry"
		if r, _ = f.do(t, retry); r.StatusCode != http.StatusCreated {
			t.Fatalf("the key's retry: %d %s, want 201", r.StatusCode, r.Body)
		}
		wantHeld(t, "another key", func() events.APIGatewayV2HTTPResponse {
			r, _ := f.do(t, enforced("acme", dedupKey("runfail", 1), "order-11"))
			return r
		}())
	})
}
