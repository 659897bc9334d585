package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/idem/keyspace"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/emf"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

func envelope(t *testing.T, body string) (code string, details map[string]any) {
	t.Helper()
	var e struct {
		Error   string         `json:"error"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("not an error envelope: %q", body)
	}
	if e.Error == "" || e.Message == "" {
		t.Fatalf("envelope missing error/message: %q", body)
	}
	return e.Error, e.Details
}

func TestFirstExecutionThenReplay(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{hdrs: map[string]string{"Set-Cookie": "s=1", "X-Custom": "v"}}
	ev := v2event("POST", "POST /runs", testKey, `{"b":2,"a":1}`)

	first := e.call(h, ev)
	if first.StatusCode != 201 || first.Headers["Openwop-Idempotent-Replay"] != "" {
		t.Fatalf("first: %+v", first)
	}
	if got := e.store.Calls(); got["Claim"] != 1 || got["Complete"] != 1 || e.store.TotalCalls() != 2 {
		t.Fatalf("first execution store calls = %v, want claim+complete", got)
	}
	if len(first.Cookies) != 1 || first.Cookies[0] != "s=1" {
		t.Fatalf("first response lost its cookie: %+v", first)
	}

	e.store.ResetCalls()
	// Same semantic body, different member order and whitespace.
	ev2 := v2event("POST", "POST /runs", testKey, "{ \"a\":1, \"b\":2 }")
	second := e.call(h, ev2)
	if e.store.TotalCalls() != 1 {
		t.Fatalf("replay store calls = %v, want exactly 1", e.store.Calls())
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times", h.Calls())
	}
	if second.StatusCode != 201 || second.Body != first.Body || second.Headers["X-Custom"] != "v" {
		t.Fatalf("replay differs: %+v vs %+v", second, first)
	}
	if second.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("replay marker missing: %v", second.Headers)
	}
	if len(second.Cookies) != 0 || second.Headers["Set-Cookie"] != "" {
		t.Fatalf("Set-Cookie replayed: %+v", second)
	}
}

func TestMismatch(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{body: `{"secret":"cached-body"}`}
	e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":2}`))
	if r.StatusCode != 409 || strings.Contains(r.Body, "cached-body") {
		t.Fatalf("mismatch: %+v", r)
	}
	if code, _ := envelope(t, r.Body); code != "idempotency_key_mismatch" {
		t.Fatalf("code = %s", code)
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran on mismatch")
	}
}

func TestScopeIsTenantOperationKey(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{}
	e.call(h, v2event("POST", "POST /runs", testKey, `{}`))
	other := v2event("POST", "POST /runs", testKey, `{}`)
	other.RequestContext.Authorizer.Lambda["tenantId"] = "tenant-b"
	e.call(h, other)
	e.call(h, v2event("POST", "POST /runs/{runId}/cancel", testKey, `{}`))
	if h.Calls() != 3 {
		t.Fatalf("handler ran %d times, want 3 independent scopes", h.Calls())
	}
	// The raw path never matters: same routeKey, different path = replay.
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	ev.RawPath = "/something/else"
	if r := e.call(h, ev); r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("different raw path did not replay")
	}
}

func TestOutcomeClassification(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		replay bool // same-key retry replays (true) or re-runs (false)
	}{
		{"2xx completed", 200, `{"ok":true}`, true},
		{"204 completed", 204, ``, true},
		{"404 terminal", 404, `{"error":"not_found","message":"x"}`, true},
		{"422 terminal", 422, `{"error":"unprocessable","message":"x"}`, true},
		{"400 other terminal", 400, `{"error":"run_terminal","message":"x"}`, true},
		{"409 terminal", 409, `{"error":"run_terminal","message":"x"}`, true},
		{"429 retryable", 429, `{"error":"rate_limited","message":"x"}`, false},
		{"500 retryable", 500, `{"error":"internal_error","message":"x"}`, false},
		{"503 retryable", 503, `busy`, false},
		{"400 validation uncached", 400, `{"error":"validation_error","message":"x"}`, false},
		{"400 key invalid uncached", 400, `{"error":"idempotency_key_invalid","message":"x"}`, false},
		{"401 uncached", 401, `{"error":"unauthenticated","message":"x"}`, false},
		{"403 uncached", 403, `{"error":"forbidden","message":"x"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			h := &handler{status: tc.status, body: tc.body}
			if tc.body == "" {
				h.body = " " // the test handler fills empty bodies
			}
			ev := v2event("POST", "POST /runs", testKey, `{}`)
			first := e.call(h, ev)
			if first.StatusCode != tc.status {
				t.Fatalf("status = %d", first.StatusCode)
			}
			second := e.call(h, ev)
			if tc.replay {
				if h.Calls() != 1 || second.Headers["Openwop-Idempotent-Replay"] != "true" || second.Body != first.Body || second.StatusCode != tc.status {
					t.Fatalf("not replayed: calls=%d %+v", h.Calls(), second)
				}
				return
			}
			if h.Calls() != 2 || second.Headers["Openwop-Idempotent-Replay"] != "" {
				t.Fatalf("replayed an uncacheable outcome: calls=%d %+v", h.Calls(), second)
			}
			// 401/403/400-validation leave no record at all; 429/5xx leave a
			// retryable one.
			rec, found, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
			if tc.status == 429 || tc.status >= 500 {
				if !found || rec.State != idem.StateRetryableFailure || rec.Response != nil || rec.Attempt != 2 {
					t.Fatalf("retryable record: %+v found=%v", rec, found)
				}
			} else if found {
				t.Fatalf("uncached outcome left a record: %+v", rec)
			}
		})
	}
}

func scopeID(tenant, op, key string) string { return keyspace.ID("tenant:"+tenant, op, key) }

func TestRetryableThenFinalReplacesRecord(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{status: 503, body: "busy"}
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	e.call(h, ev)
	h.status, h.body = 201, `{"done":true}`
	if r := e.call(h, ev); r.StatusCode != 201 {
		t.Fatalf("retry: %+v", r)
	}
	r := e.call(h, ev)
	if r.StatusCode != 201 || r.Body != `{"done":true}` || r.Headers["Openwop-Idempotent-Replay"] != "true" || h.Calls() != 2 {
		t.Fatalf("final outcome did not replace: calls=%d %+v", h.Calls(), r)
	}
}

func TestHandlerErrorAndPanicAreRetryable500(t *testing.T) {
	for _, name := range []string{"error", "panic"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, nil)
			h := &handler{}
			if name == "panic" {
				h.panic = true
			} else {
				h.err = errors.New("db down")
			}
			ev := v2event("POST", "POST /runs", testKey, `{}`)
			r := e.call(h, ev)
			if r.StatusCode != 500 {
				t.Fatalf("status %d", r.StatusCode)
			}
			if code, _ := envelope(t, r.Body); code != "internal_error" {
				t.Fatalf("code %s", code)
			}
			rec, _, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
			if rec.State != idem.StateRetryableFailure {
				t.Fatalf("record state %s", rec.State)
			}
			h.panic, h.err = false, nil
			if r := e.call(h, ev); r.StatusCode != 201 || h.Calls() != 2 {
				t.Fatalf("retry did not re-run: %+v", r)
			}
		})
	}
}

func TestKeyRejections(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{}
	for name, mod := range map[string]func(ev *events.APIGatewayV2HTTPRequest){
		"too short":   func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["idempotency-key"] = "short" },
		"bad char":    func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["idempotency-key"] = testKey + "!" },
		"whitespace":  func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["idempotency-key"] = " " + testKey },
		"comma join":  func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["idempotency-key"] = testKey + "," + testKey },
		"two headers": func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["Idempotency-Key"] = testKey },
		"empty":       func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["idempotency-key"] = "" },
		"too long":    func(ev *events.APIGatewayV2HTTPRequest) { ev.Headers["idempotency-key"] = strings.Repeat("a", 129) },
	} {
		t.Run(name, func(t *testing.T) {
			ev := v2event("POST", "POST /runs", testKey, `{}`)
			mod(&ev)
			r := e.call(h, ev)
			if r.StatusCode != 400 {
				t.Fatalf("status %d", r.StatusCode)
			}
			if code, _ := envelope(t, r.Body); code != "idempotency_key_invalid" {
				t.Fatalf("code %s", code)
			}
		})
	}
	if h.Calls() != 0 || e.store.Len() != 0 {
		t.Fatalf("invalid keys ran the handler (%d) or wrote records (%d)", h.Calls(), e.store.Len())
	}
}

func TestMissingKey(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{}
	ev := v2event("POST", "POST /runs", "", `{}`)
	e.call(h, ev)
	e.call(h, ev)
	if h.Calls() != 2 || e.store.TotalCalls() != 0 {
		t.Fatalf("missing key should run without deduplication")
	}
	req := newEnv(t, func(c *idem.Config) { c.Required = true })
	r := req.call(h, ev)
	code, details := envelope(t, r.Body)
	if r.StatusCode != 400 || code != "idempotency_key_invalid" || details["reason"] != "missing" {
		t.Fatalf("required: %+v", r)
	}
}

func TestSafeMethodsIgnoreKey(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Required = true })
	h := &handler{status: 200}
	for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
		e.call(h, v2event(m, m+" /runs", "bad key!", ""))
	}
	if h.Calls() != 3 || e.store.TotalCalls() != 0 {
		t.Fatalf("safe methods honoured the key")
	}
}

func TestRouteOptOut(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.Required = true
		c.Policy = erp.Policy
		c.Routes = map[string]idem.Route{"POST /api/v1/inbound/work-orders/test": {Skip: true}}
	})
	h := &handler{status: 200}
	ev := v2event("POST", "POST /api/v1/inbound/work-orders/test", "", `{}`)
	r1 := e.call(h, ev)
	ev.Headers["idempotency-key"] = "ERP-WO-20260807-000001"
	r2 := e.call(h, ev)
	if h.Calls() != 2 || e.store.TotalCalls() != 0 || r1.Headers["Idempotency-Replayed"] != "" || r2.Headers["Idempotency-Replayed"] != "" {
		t.Fatalf("test route was not bypassed")
	}
}

func TestTenantResolution(t *testing.T) {
	t.Run("unauthenticated rejected", func(t *testing.T) {
		e := newEnv(t, nil)
		h := &handler{}
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		ev.RequestContext.Authorizer = nil
		r := e.call(h, ev)
		if code, _ := envelope(t, r.Body); r.StatusCode != 401 || code != "unauthenticated" || h.Calls() != 0 || e.store.Len() != 0 {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("anonymous tenant", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Unauthenticated = idem.AnonymousTenant })
		h := &handler{}
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		ev.RequestContext.Authorizer = nil
		e.call(h, ev)
		e.call(h, ev)
		// An authenticated tenant literally named "anon:" is a different scope.
		ev2 := v2event("POST", "POST /runs", testKey, `{}`)
		ev2.RequestContext.Authorizer.Lambda["tenantId"] = "anon:"
		e.call(h, ev2)
		if h.Calls() != 2 {
			t.Fatalf("calls %d", h.Calls())
		}
	})
	t.Run("jwt claim", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Tenant = idem.JWTClaim("org") })
		h := &handler{}
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"org": "o1"}}}
		if r := e.call(h, ev); r.StatusCode != 201 {
			t.Fatalf("%+v", r)
		}
		if _, ok, _ := e.store.Get(context.Background(), scopeID("o1", "POST /runs", testKey), e.clock.Now()); !ok {
			t.Fatalf("record not scoped to the JWT claim")
		}
	})
	t.Run("iam principal", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Tenant = idem.IAMPrincipal() })
		h := &handler{}
		ev := v2event("POST", "POST /runs", testKey, `{}`)
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::1:user/u"}}
		e.call(h, ev)
		if _, ok, _ := e.store.Get(context.Background(), scopeID("arn:aws:iam::1:user/u", "POST /runs", testKey), e.clock.Now()); !ok {
			t.Fatalf("record not scoped to the IAM principal")
		}
	})
	t.Run("body tenant mismatch is 403 with no record", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.BodyTenantField = "tenantId" })
		h := &handler{}
		r := e.call(h, v2event("POST", "POST /runs", testKey, `{"tenantId":"tenant-b"}`))
		if code, _ := envelope(t, r.Body); r.StatusCode != 403 || code != "forbidden" || h.Calls() != 0 || e.store.Len() != 0 {
			t.Fatalf("%+v calls=%d", r, h.Calls())
		}
		if r := e.call(h, v2event("POST", "POST /runs", testKey, `{"tenantId":"tenant-a"}`)); r.StatusCode != 201 {
			t.Fatalf("matching body tenant rejected: %+v", r)
		}
	})
	// Without an Idempotency-Key the request is not deduplicated, but the
	// body's tenant is still not the caller's: the same 403, and the
	// handler does not run.
	t.Run("body tenant mismatch without a key is 403 too", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.BodyTenantField = "tenantId" })
		h := &handler{}
		r := e.call(h, v2event("POST", "POST /runs", "", `{"tenantId":"tenant-b"}`))
		if code, details := envelope(t, r.Body); r.StatusCode != 403 || code != "forbidden" || details["reason"] != "tenant_mismatch" || h.Calls() != 0 || e.store.Len() != 0 {
			t.Fatalf("%+v calls=%d", r, h.Calls())
		}
		if r := e.call(h, v2event("POST", "POST /runs", "", `{"tenantId":"tenant-a"}`)); r.StatusCode != 201 || h.Calls() != 1 {
			t.Fatalf("matching body tenant rejected: %+v", r)
		}
		if r := e.call(h, v2event("POST", "POST /runs", "", `{"a":1}`)); r.StatusCode != 201 || h.Calls() != 2 {
			t.Fatalf("body without a tenant rejected: %+v", r)
		}
	})
}

func TestInvalidJSONIsValidationError(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{}
	for _, body := range []string{`{"a":`, `{"a":1,"a":2}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `nope`} {
		r := e.call(h, v2event("POST", "POST /runs", testKey, body))
		if code, _ := envelope(t, r.Body); r.StatusCode != 400 || code != "validation_error" {
			t.Fatalf("body %q: %+v", body, r)
		}
	}
	if h.Calls() != 0 || e.store.Len() != 0 {
		t.Fatalf("invalid JSON ran the handler or wrote a record")
	}
	// A non-JSON content type is hashed as bytes.
	ev := v2event("POST", "POST /runs", testKey, `{"a":`)
	ev.Headers["content-type"] = "text/plain"
	if r := e.call(h, ev); r.StatusCode != 201 {
		t.Fatalf("text body: %+v", r)
	}
}

func TestBase64RequestBodyDecoded(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{}
	ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
	e.call(h, ev)
	ev.Body, ev.IsBase64Encoded = "eyJhIjoxfQ==", true // {"a":1}
	if r := e.call(h, ev); r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("base64 body not decoded before hashing: %+v", r)
	}
	ev.Body = "***"
	if r := e.call(h, ev); r.StatusCode != 400 {
		t.Fatalf("bad base64: %+v", r)
	}
}

func TestConcurrentDuplicatesOneExecution(t *testing.T) {
	// The duplicates wait as long as it takes (the Wait is a hang guard):
	// the first to arrive must not give up while a slow machine starts the
	// last one.
	e := newEnv(t, func(c *idem.Config) { c.Wait = 10 * time.Minute })
	release := make(chan struct{})
	h := &handler{block: release}
	const n = 32
	var wg sync.WaitGroup
	resps := make([]events.APIGatewayV2HTTPResponse, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resps[i], _ = e.guard.HTTPAPI(h.v2)(context.Background(), v2event("POST", "POST /runs", testKey, `{"x":1}`))
		}(i)
	}
	// Let every duplicate reach its wait, then let the winner finish (no
	// deadline: on a slow machine the duplicates get there later, never
	// not at all).
	for e.store.Calls()["Claim"] < n {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times", h.Calls())
	}
	replays := 0
	for _, r := range resps {
		if r.StatusCode != 201 || r.Body != resps[0].Body {
			t.Fatalf("duplicate got %+v", r)
		}
		if r.Headers["Openwop-Idempotent-Replay"] == "true" {
			replays++
		}
	}
	if replays != n-1 {
		t.Fatalf("%d replays, want %d", replays, n-1)
	}
}

func TestInFlight409(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Wait = 50 * time.Millisecond })
	release := make(chan struct{})
	started := make(chan struct{})
	h := &handler{block: release, before: func(context.Context) { close(started) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.call(h, v2event("POST", "POST /runs", testKey, `{}`))
	}()
	<-started
	e.clock.Advance(100 * time.Second) // lease 300 s: 200 s remain; claimed 100 s ago, alive
	r := e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{}`))
	e.clock.Advance(150 * time.Second) // no lease write for 250 s (heartbeat 100 s): looks dead
	dead := e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{}`))
	close(release)
	<-done
	code, details := envelope(t, r.Body)
	if r.StatusCode != 409 || code != "idempotency_in_flight" || r.Headers["Retry-After"] != "1" {
		t.Fatalf("in-flight, owner alive: %+v", r)
	}
	if dead.StatusCode != 409 || dead.Headers["Retry-After"] != "50" {
		t.Fatalf("in-flight, owner looks dead: %+v", dead)
	}
	for k := range details {
		if strings.Contains(strings.ToLower(k), "retry") {
			t.Fatalf("retry timing in details: %v", details)
		}
	}
}

// The Powertools trap at the protocol level: the first invocation is slow,
// its lease is reclaimed and the second completes; the first's late
// completion and late delete are rejected and the record keeps the second's
// response.
func TestSlowFirstInvocationIsFenced(t *testing.T) {
	for _, late := range []struct {
		name   string
		status int
	}{{"late completion", 201}, {"late delete", 403}, {"late release", 503}} {
		t.Run(late.name, func(t *testing.T) {
			var metrics syncBuffer
			e := newEnv(t, func(c *idem.Config) { c.Metrics = emf.New(&metrics, "idemkit") })
			release := make(chan struct{})
			started := make(chan struct{})
			slow := &handler{block: release, status: late.status, body: `{"who":"slow"}`, before: func(context.Context) { close(started) }}
			ev := v2event("POST", "POST /runs", testKey, `{}`)
			var slowResp events.APIGatewayV2HTTPResponse
			done := make(chan struct{})
			go func() {
				defer close(done)
				slowResp = e.call(slow, ev)
			}()
			<-started
			e.clock.Advance(idem.DefaultLease + time.Second)
			fast := &handler{body: `{"who":"fast"}`}
			if r := e.call(fast, ev); r.Body != `{"who":"fast"}` {
				t.Fatalf("reclaim: %+v", r)
			}
			close(release)
			<-done
			if late.status == 201 {
				if code, _ := envelope(t, slowResp.Body); slowResp.StatusCode != 409 || code != "idempotency_in_flight" {
					t.Fatalf("fenced slow completion answered %+v", slowResp)
				}
			}
			r := e.call(&handler{}, ev)
			if r.Body != `{"who":"fast"}` || r.Headers["Openwop-Idempotent-Replay"] != "true" {
				t.Fatalf("record lost the second response: %+v", r)
			}
			rec, _, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
			if rec.Attempt != 2 || rec.State != idem.StateCompleted {
				t.Fatalf("record %+v", rec)
			}
			if !strings.Contains(e.logs.String(), "fenced write rejected") {
				t.Fatalf("fence rejection not logged")
			}
			// The rejected write is counted once in the lease-lost counter,
			// with no dimensions (the alarm on it watches exactly that).
			if n := strings.Count(metrics.String(), `"`+idem.MetricLeaseLostWrites+`":1}`); n != 1 {
				t.Fatalf("%s counted %d times, want 1:\n%s", idem.MetricLeaseLostWrites, n, metrics.String())
			}
		})
	}
}

func TestHeartbeatRenewsAndDetectsLostLease(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Heartbeat = 10 * time.Millisecond })
	id := scopeID(testTenant, "POST /runs", testKey)
	var cause error
	h := &handler{before: func(ctx context.Context) {
		// Wait for a renewal to move the lease (however long this machine
		// takes to tick the heartbeat).
		for e.store.Calls()["Renew"] == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		// Steal the lease: the next heartbeat must cancel our context.
		e.clock.Advance(2 * idem.DefaultLease)
		cur, _, _ := e.store.Get(context.Background(), id, e.clock.Now())
		res, err := e.store.Claim(context.Background(), idem.Record{ID: id, Digest: cur.Digest, State: idem.StatePending,
			Owner: "thief", LeaseExpires: e.clock.Now().Add(time.Minute), Expires: e.clock.Now().Add(time.Hour)}, e.clock.Now())
		if err != nil || res.Decision != idem.Reclaimed {
			t.Errorf("steal: %v %v", res.Decision, err)
		}
		<-ctx.Done() // the next heartbeat must cancel it, however late it ticks
		cause = context.Cause(ctx)
	}}
	r := e.call(h, v2event("POST", "POST /runs", testKey, `{}`))
	if !errors.Is(cause, idem.ErrLeaseLost) {
		t.Fatalf("handler context cause = %v, want ErrLeaseLost", cause)
	}
	if r.StatusCode != 409 {
		t.Fatalf("lost lease answered %+v", r)
	}
}

func TestLambdaLeaseFromDeadline(t *testing.T) {
	e := newEnv(t, nil)
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "aws-1"})
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var leaseEnd, claimedBy time.Time
	h := &handler{before: func(context.Context) {
		claimedBy = time.Now()
		rec, _, _ := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
		leaseEnd = rec.LeaseExpires
	}}
	sent := time.Now()
	if _, err := e.guard.HTTPAPI(h.v2)(ctx, v2event("POST", "POST /runs", testKey, `{}`)); err != nil {
		t.Fatal(err)
	}
	// The lease is the time remaining when the claim was made, plus the
	// skew: the claim came between sending and the handler's start, so the
	// lease lies between what remained at those two moments (a bracket
	// that holds however slowly this machine gets to the claim).
	got := leaseEnd.Sub(e.clock.Now())
	lo, hi := deadline.Sub(claimedBy)+idem.DefaultLeaseSkew, deadline.Sub(sent)+idem.DefaultLeaseSkew
	if got < lo-time.Millisecond || got > hi+time.Millisecond {
		t.Fatalf("lambda lease = %s, want the remaining time + skew (%s to %s)", got, lo, hi)
	}
	if e.store.Calls()["Renew"] != 0 {
		t.Fatalf("heartbeat ran inside Lambda")
	}
}

func TestRetention(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{}
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	e.call(h, ev)
	id := scopeID(testTenant, "POST /runs", testKey)
	rec, _, _ := e.store.Get(context.Background(), id, e.clock.Now())
	if got := rec.Expires.Sub(e.clock.Now()); got != 24*time.Hour {
		t.Fatalf("retention %s, want 24h", got)
	}
	e.clock.Advance(24 * time.Hour)
	e.call(h, ev)
	if h.Calls() != 2 {
		t.Fatalf("expired record replayed")
	}

	f := newEnv(t, func(c *idem.Config) { c.Retention = idem.Forever })
	f.call(h, ev)
	rec, _, _ = f.store.Get(context.Background(), id, f.clock.Now())
	if !rec.Expires.IsZero() {
		t.Fatalf("Forever wrote an expiry")
	}
	f.clock.Advance(24 * 365 * 10 * time.Hour)
	if r := f.call(h, ev); r.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("forever record not replayed after 10 years")
	}
}

func TestPresetPolicyHeaders(t *testing.T) {
	t.Run("erp", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Policy = erp.Policy })
		h := &handler{}
		key := "ERP-WO-20260807-000001"
		ev := v2event("POST", "POST /api/v1/inbound/work-orders", key, `{}`)
		first := e.call(h, ev)
		firstID := ev.RequestContext.RequestID
		ev.RequestContext.RequestID = "req-second"
		second := e.call(h, ev)
		if first.Headers["Idempotency-Replayed"] != "false" || first.Headers["Idempotency-Key"] != key ||
			first.Headers["X-Request-Id"] != firstID || first.Headers["Idempotency-Original-Request-Id"] != firstID {
			t.Fatalf("first: %v", first.Headers)
		}
		if second.Headers["Idempotency-Replayed"] != "true" || second.Headers["X-Request-Id"] != "req-second" ||
			second.Headers["Idempotency-Original-Request-Id"] != firstID || second.Headers["Openwop-Idempotent-Replay"] != "" {
			t.Fatalf("replay: %v", second.Headers)
		}
		r := e.call(h, v2event("POST", "POST /api/v1/inbound/work-orders", key, `{"other":1}`))
		code, details := envelope(t, r.Body)
		if code != erp.CodeKeyConflict || details != nil || r.Headers["Idempotency-Replayed"] != "false" {
			t.Fatalf("erp mismatch: %+v", r)
		}
		if r := e.call(h, v2event("POST", "POST /x", "has space inside", `{}`)); r.StatusCode != 400 {
			t.Fatalf("erp grammar")
		}
	})
	t.Run("commerce", func(t *testing.T) {
		e := newEnv(t, func(c *idem.Config) { c.Policy = commerce.Policy })
		h := &handler{}
		ev := commerceEvent("POST", "POST /orders", "cart:123", `{}`)
		e.call(h, ev)
		r := e.call(h, ev)
		if r.Headers["Idempotent-Replayed"] != "true" {
			t.Fatalf("%v", r.Headers)
		}
		if g := e.guard.Config(); g.Retention != idem.Forever {
			t.Fatalf("commerce retention %s", g.Retention)
		}
	})
}

func TestTransactionalCompletion(t *testing.T) {
	e := newEnv(t, nil)
	h := &handler{before: func(ctx context.Context) {
		if err := idem.Transact(ctx, memstore.Write{Key: "order-1", Value: []byte("v"), IfAbsent: true}); err != nil {
			t.Errorf("Transact: %v", err)
		}
	}}
	ev := v2event("POST", "POST /orders", testKey, `{}`)
	e.call(h, ev)
	if _, ok := e.store.Item("order-1"); !ok {
		t.Fatalf("business write not committed")
	}
	if err := idem.Transact(context.Background(), 1); !errors.Is(err, idem.ErrNoClaim) {
		t.Fatalf("Transact outside a claim: %v", err)
	}

	// A fenced completion writes nothing and answers retryably.
	e2 := newEnv(t, nil)
	release := make(chan struct{})
	started := make(chan struct{})
	slow := &handler{block: release, before: func(ctx context.Context) {
		_ = idem.Transact(ctx, memstore.Write{Key: "order-slow", Value: []byte("v")})
		close(started)
	}}
	var slowResp events.APIGatewayV2HTTPResponse
	done := make(chan struct{})
	go func() { defer close(done); slowResp = e2.call(slow, ev) }()
	<-started
	e2.clock.Advance(idem.DefaultLease)
	e2.call(&handler{}, ev)
	close(release)
	<-done
	if _, ok := e2.store.Item("order-slow"); ok {
		t.Fatalf("fenced completion committed its business write")
	}
	if slowResp.StatusCode != 409 {
		t.Fatalf("fenced tx answered %+v", slowResp)
	}

	// A conflicting business write: nothing written, retryable 500.
	h3 := &handler{before: func(ctx context.Context) {
		_ = idem.Transact(ctx, memstore.Write{Key: "order-1", Value: []byte("dup"), IfAbsent: true})
	}}
	r := e.call(h3, v2event("POST", "POST /orders", "k_other_key_0123456789ab", `{}`))
	if r.StatusCode != 500 {
		t.Fatalf("conflict answered %+v", r)
	}
	if v, _ := e.store.Item("order-1"); string(v) != "v" {
		t.Fatalf("conflicting write applied")
	}
}

func TestRawKeyNeverLogged(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Wait = 30 * time.Millisecond; c.Heartbeat = 5 * time.Millisecond })
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	e.call(&handler{status: 503}, ev)                                     // release
	e.call(&handler{}, ev)                                                // reclaim
	e.call(&handler{}, ev)                                                // replay
	e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{"x":1}`)) // mismatch
	e.call(&handler{err: errors.New("failed with " + testKey)}, v2event("POST", "POST /b", testKey, `{}`))
	e.call(&handler{before: func(context.Context) { time.Sleep(20 * time.Millisecond) }}, v2event("POST", "POST /c", testKey, `{}`))
	logs := e.logs.String()
	if logs == "" || !strings.Contains(logs, `"key_hash":"kh:`) || !strings.Contains(logs, `"request_id"`) {
		t.Fatalf("expected JSON logs with key_hash and request_id:\n%s", logs)
	}
	// The handler's own error text may mention the key; the Guard logs only
	// its own fields, so check the Guard's lines.
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		delete(m, "error")
		b, _ := json.Marshal(m)
		if strings.Contains(string(b), testKey) {
			t.Fatalf("raw key logged: %s", line)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	_, err := idem.New(idem.Config{Lease: time.Second, Retention: time.Hour, Tenant: idem.TenantSource{Kind: 9}})
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, idem.ErrConfig) || len(ce.Problems) != 4 {
		t.Fatalf("err = %v", err)
	}
	if _, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("svc"), Policy: erp.Policy, Retention: time.Hour}); err != nil {
		t.Fatalf("ERP allows short retention: %v", err)
	}
}

func TestEnv(t *testing.T) {
	vars := map[string]string{
		"IDEMPOTENCY_ENABLED": "true", "IDEMPOTENCY_REQUIRED": "true",
		"IDEMPOTENCY_PROCESSING_LEASE_SECONDS": "60", "IDEMPOTENCY_RETENTION_HOURS": "forever",
		"IDEMPOTENCY_TABLE": "idem-table",
	}
	e, err := idemenv.Load(func(k string) string { return vars[k] })
	if err != nil || !e.Enabled || !e.Required || e.Lease != time.Minute || e.Retention != idem.Forever || e.Table != "idem-table" {
		t.Fatalf("%+v %v", e, err)
	}
	var c idem.Config
	e.Apply(&c)
	if !c.Required || c.Disabled || c.Lease != time.Minute || c.Retention != idem.Forever {
		t.Fatalf("apply: %+v", c)
	}
	bad := map[string]string{"IDEMPOTENCY_ENABLED": "yes please", "IDEMPOTENCY_PROCESSING_LEASE_SECONDS": "5", "IDEMPOTENCY_RETENTION_HOURS": "-3"}
	_, err = idemenv.Load(func(k string) string { return bad[k] })
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("bad env: %v", err)
	}
	for _, p := range ce.Problems {
		if !strings.Contains(p, "IDEMPOTENCY_") {
			t.Fatalf("problem does not name its variable: %q", p)
		}
	}
	d, _ := idemenv.Load(func(string) string { return "" })
	if !d.Enabled || d.Required || d.Lease != 0 || d.Retention != 0 {
		t.Fatalf("defaults: %+v", d)
	}
	_ = http.MethodPost
}

// Retention runs from the write that claims a record (a reclaim starts it
// again) and from its completion; a release (a handler error) does not
// extend it, so a released record ends Retention after its claim.
func TestRetentionRunsFromClaimAndCompletion(t *testing.T) {
	e := newEnv(t, nil)
	id := scopeID(testTenant, "POST /runs", testKey)
	get := func() idem.Record {
		t.Helper()
		rec, found, err := e.store.Get(context.Background(), id, e.clock.Now())
		if err != nil || !found {
			t.Fatalf("record: found %v, %v", found, err)
		}
		return rec
	}
	start := e.clock.Now()
	e.call(&handler{err: errors.New("down")}, v2event("POST", "POST /runs", testKey, `{}`))
	e.clock.Advance(time.Hour)
	if rec := get(); rec.State != idem.StateRetryableFailure || !rec.Expires.Equal(start.Add(24*time.Hour)) {
		t.Fatalf("after the release: %s, expires %v; want retryable, %v (the claim's)", rec.State, rec.Expires, start.Add(24*time.Hour))
	}
	e.call(&handler{}, v2event("POST", "POST /runs", testKey, `{}`))
	if rec := get(); rec.State != idem.StateCompleted || !rec.Expires.Equal(start.Add(25*time.Hour)) {
		t.Fatalf("after the reclaim's completion: %s, expires %v; want %v", rec.State, rec.Expires, start.Add(25*time.Hour))
	}
}
