package dynamostore_test

// The ERP service's policy, behaviour by behaviour (continued): scope,
// key grammar, the error envelope and its codes, the response headers, the
// processing lease, retention and the canonical hash hook, through the
// Guard on DynamoDB (every engine).

import (
	"context"
	"encoding/json"
	"github.com/idemkit/idemkit/idem/canon"
	"github.com/idemkit/idemkit/idem/idemenv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// erpEnvelope is the ERP policy's error envelope.
type erpEnvelope struct {
	Error     string         `json:"error"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details"`
	RequestID *string        `json:"request_id"`
}

func erpError(t *testing.T, r events.APIGatewayV2HTTPResponse) erpEnvelope {
	t.Helper()
	var e erpEnvelope
	if err := json.Unmarshal([]byte(r.Body), &e); err != nil || e.Error == "" {
		t.Fatalf("not an error envelope: %d %s", r.StatusCode, r.Body)
	}
	return e
}

// withCredential sets the authorizer context's client, company and
// organisation ("" deletes the part).
func withCredential(ev events.APIGatewayV2HTTPRequest, client, company, org string) events.APIGatewayV2HTTPRequest {
	ctx := map[string]any{"tenantId": "acme"}
	for k, v := range map[string]string{erp.CredentialClient: client, erp.CredentialCompany: company, erp.CredentialOrganization: org} {
		if v != "" {
			ctx[k] = v
		}
	}
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: ctx}
	return ev
}

// TestERPScopeClientCompanyOrganisationMethodRouteKey: a record is scoped by
// the credential's client, company and organisation, the method, the route
// and the key. The same key and body under another client, company,
// organisation, method or route is independent (it runs); only the same
// scope replays.
func TestERPScopeClientCompanyOrganisationMethodRouteKey(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		key := erpKey()
		base := func() events.APIGatewayV2HTTPRequest {
			return withCredential(guardEvent(key, `{"n":1}`), "client-1", "C100", "ORG-1")
		}
		if r := call(t, g.HTTPAPI(h.serve), base()); r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "false" {
			t.Fatalf("first: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
		put := base()
		put.RouteKey, put.RequestContext.HTTP.Method = "PUT /runs", "PUT"
		for name, ev := range map[string]events.APIGatewayV2HTTPRequest{
			"another client":       withCredential(guardEvent(key, `{"n":1}`), "client-2", "C100", "ORG-1"),
			"another company":      withCredential(guardEvent(key, `{"n":1}`), "client-1", "C200", "ORG-1"),
			"another organisation": withCredential(guardEvent(key, `{"n":1}`), "client-1", "C100", "ORG-2"),
			"another method":       put,
			"another route": func() events.APIGatewayV2HTTPRequest {
				ev := base()
				ev.RouteKey = "POST /orders"
				return ev
			}(),
		} {
			before := h.runs.Load()
			r := call(t, g.HTTPAPI(h.serve), ev)
			if r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "false" || h.runs.Load() != before+1 {
				t.Fatalf("%s, same key: %d %v %s; want an independent first execution", name, r.StatusCode, r.Headers, r.Body)
			}
		}
		if r := call(t, g.HTTPAPI(h.serve), base()); r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "true" {
			t.Fatalf("same scope again: %d %v, want a replay", r.StatusCode, r.Headers)
		}
		if n := h.runs.Load(); n != 6 {
			t.Fatalf("handler ran %d times, want 6 (one per scope)", n)
		}
	})
}

// TestERPScopeNeedsEveryCredentialPart: a keyed request whose credential
// lacks the client, the company or the organisation is 401 unauthenticated
// (in the ERP envelope, with the current request_id) before any store
// round trip; the handler never runs.
func TestERPScopeNeedsEveryCredentialPart(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		v.cnt.Reset()
		for _, ev := range []events.APIGatewayV2HTTPRequest{
			withCredential(guardEvent(erpKey(), `{}`), "", "C100", "ORG-1"),
			withCredential(guardEvent(erpKey(), `{}`), "client-1", "", "ORG-1"),
			withCredential(guardEvent(erpKey(), `{}`), "client-1", "C100", ""),
		} {
			r := call(t, g.HTTPAPI(h.serve), ev)
			env := erpError(t, r)
			if r.StatusCode != 401 || env.Error != "unauthenticated" || env.RequestID == nil || *env.RequestID != ev.RequestContext.RequestID {
				t.Fatalf("credential %v: %d %s", ev.RequestContext.Authorizer.Lambda, r.StatusCode, r.Body)
			}
		}
		if n := v.cnt.Total(); n != 0 || h.runs.Load() != 0 {
			t.Fatalf("incomplete credentials: %d round trips, %d executions; want 0, 0", n, h.runs.Load())
		}
	})
}

// TestERPAnonymousClientWhenAuthDisabled: without authentication — a
// single-tenant function (no authorizer), or an anonymous request under
// AnonymousTenant — the client, company and organisation are the anonymous
// ones: the request runs once and replays, in a scope no authenticated
// credential shares.
func TestERPAnonymousClientWhenAuthDisabled(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		single := erpGuard(t, v.s, clk, func(c *idem.Config) { c.Tenant = idem.SingleTenant("erp") })
		anon := erpGuard(t, v.s, clk, func(c *idem.Config) { c.Unauthenticated = idem.AnonymousTenant })
		for name, g := range map[string]*idem.Guard{"SingleTenant": single, "AnonymousTenant": anon} {
			h := &countingHandler{}
			key := erpKey()
			ev := func() events.APIGatewayV2HTTPRequest {
				ev := guardEvent(key, `{"n":1}`)
				ev.RequestContext.Authorizer = nil
				return ev
			}
			first := call(t, g.HTTPAPI(h.serve), ev())
			again := call(t, g.HTTPAPI(h.serve), ev())
			if first.StatusCode != 201 || again.StatusCode != 201 || again.Headers[erp.HeaderReplayed] != "true" || h.runs.Load() != 1 {
				t.Fatalf("%s: %d, %d %v; %d executions, want one and a replay", name, first.StatusCode, again.StatusCode, again.Headers, h.runs.Load())
			}
			// An authenticated caller's same key is another scope.
			if name == "AnonymousTenant" {
				if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"n":1}`)); r.Headers[erp.HeaderReplayed] != "false" || h.runs.Load() != 2 {
					t.Fatalf("authenticated caller, anonymous caller's key: %d %v", r.StatusCode, r.Headers)
				}
			}
		}
	})
}

// TestERPKeyGrammar8To128: a key is 8..128 characters of A-Z a-z 0-9 . _ : -
// and case-sensitive. 7 or 129 characters are 400 idempotency_key_invalid
// (details.reason "length"), any other character (space, '~', '/', '+') 400
// (reason "charset"), with no store round trip; 8 and 128 characters and
// every allowed character are accepted; two keys that differ only in letter
// case are two records.
func TestERPKeyGrammar8To128(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		v.cnt.Reset()
		for key, reason := range map[string]string{
			"ABCDEFG":                  "length",
			strings.Repeat("a", 129):   "length",
			"ERP WO 0001":              "charset",
			"ERP~WO~0001":              "charset",
			"ERP/WO/0001":              "charset",
			"ERP+WO+0001":              "charset",
			"ERP-WO-\u00e9\u00e9-0001": "charset",
		} {
			r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{}`))
			env := erpError(t, r)
			if r.StatusCode != 400 || env.Error != "idempotency_key_invalid" || env.Details["reason"] != reason || r.Headers[idem.HeaderKey] != "" {
				t.Fatalf("key %q: %d %v %s; want 400 reason %s, the key not echoed", key, r.StatusCode, r.Headers, r.Body, reason)
			}
		}
		if n := v.cnt.Total(); n != 0 || h.runs.Load() != 0 {
			t.Fatalf("refused keys: %d round trips, %d executions; want 0, 0", n, h.runs.Load())
		}
		suffix := rnd(4)
		for _, key := range []string{
			"Ab3." + suffix[:4],                       // 8
			strings.Repeat("Z", 120) + suffix,         // 128
			"AZaz09._:-" + suffix,                     // every class
			"erp-wo-" + strings.ToLower(suffix) + "x", // lower case
			"ERP-WO-" + strings.ToLower(suffix) + "X", // the same key with other letter case
		} {
			if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{}`)); r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "false" || r.Headers[idem.HeaderKey] != key {
				t.Fatalf("key %q: %d %v %s, want a first execution echoing it", key, r.StatusCode, r.Headers, r.Body)
			}
		}
		if n := h.runs.Load(); n != 5 {
			t.Fatalf("handler ran %d times, want 5 (keys are case-sensitive)", n)
		}
	})
}

// TestERPInProgressEnvelope: while another request owns an active
// processing lease, a same-key request is 409 with the envelope's error
// IDEMPOTENCY_REQUEST_IN_PROGRESS, request_id and X-Request-ID this
// attempt's id, and Retry-After: 2; the handler does not run again.
func TestERPInProgressEnvelope(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		key := erpKey()
		release, started := make(chan struct{}), make(chan struct{})
		h := &countingHandler{before: func(_ context.Context, n int32) {
			if n == 1 {
				close(started)
				<-release
			}
		}}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = g.HTTPAPI(h.serve)(ctxT(t), guardEvent(key, `{"n":1}`))
		}()
		<-started
		ev := guardEvent(key, `{"n":1}`)
		r := call(t, g.HTTPAPI(h.serve), ev)
		close(release)
		wg.Wait()
		env := erpError(t, r)
		if r.StatusCode != 409 || env.Error != erp.CodeRequestInProgress || r.Headers[idem.HeaderRetryAfter] != "2" ||
			env.RequestID == nil || *env.RequestID != ev.RequestContext.RequestID || r.Headers[erp.HeaderRequestID] != ev.RequestContext.RequestID {
			t.Fatalf("in progress: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
		if env.Details != nil || strings.Contains(r.Body, "idempotency_in_flight") {
			t.Fatalf("in progress carries the OpenWOP code: %s", r.Body)
		}
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

// TestERPKeyConflictEnvelope: the same scope and key with another canonical
// payload is 409 with the envelope's error IDEMPOTENCY_KEY_CONFLICT, the
// message "The Idempotency-Key has already been used with a different
// request payload." and request_id this attempt's id; it carries no
// Retry-After (retrying it cannot succeed) and never the cached body.
func TestERPKeyConflictEnvelope(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		key := erpKey()
		if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"n":1}`)); r.StatusCode != 201 {
			t.Fatalf("first: %d %s", r.StatusCode, r.Body)
		}
		ev := guardEvent(key, `{"n":2}`)
		r := call(t, g.HTTPAPI(h.serve), ev)
		env := erpError(t, r)
		if r.StatusCode != 409 || env.Error != erp.CodeKeyConflict ||
			env.Message != "The Idempotency-Key has already been used with a different request payload." ||
			env.RequestID == nil || *env.RequestID != ev.RequestContext.RequestID || env.Details != nil {
			t.Fatalf("conflict: %d %s", r.StatusCode, r.Body)
		}
		if r.Headers[idem.HeaderRetryAfter] != "" || strings.Contains(r.Body, "execution") || h.runs.Load() != 1 {
			t.Fatalf("conflict: headers %v body %s, %d executions", r.Headers, r.Body, h.runs.Load())
		}
	})
}

// TestERPEnvelopeRequestIDIsCurrentAttempt: every envelope carries
// request_id equal to the current attempt's id: the Guard's own (an invalid
// key, a missing key on a required route, a refused body) and a handler's
// JSON body with a top-level request_id, which is set to the current
// attempt's id on the first answer and on every replay — as JSON and as
// XML — while the rest of the body is the stored one byte for byte and the
// stored response keeps the handler's.
func TestERPEnvelopeRequestIDIsCurrentAttempt(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := workOrderGuard(t, st, clk, func(c *idem.Config) { c.Required = true })
		for name, ev := range map[string]events.APIGatewayV2HTTPRequest{
			"invalid key": workOrderEvent("short", "application/json", woJSON),
			"missing key": workOrderEvent("", "application/json", woJSON),
			"refused body": workOrderEvent(erpKey(), "application/json",
				`{"work_order_number":"WO-1","projects":[]}`),
		} {
			if name == "missing key" {
				delete(ev.Headers, "idempotency-key")
			}
			r := call(t, g.HTTPAPI((&woHandler{}).serve), ev)
			env := erpError(t, r)
			if r.StatusCode != 400 || env.RequestID == nil || *env.RequestID != ev.RequestContext.RequestID {
				t.Fatalf("%s: %d %s, want request_id %s", name, r.StatusCode, r.Body, ev.RequestContext.RequestID)
			}
		}

		// A handler's envelope names the attempt it answered.
		runs := 0
		handler := func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 409, Headers: map[string]string{"Content-Type": "application/json"},
				Body: `{"error":"NO_PROJECT_PROCESSED",  "request_id": "` + ev.RequestContext.RequestID + `", "message":"No project was processed."}`}, nil
		}
		key := erpKey()
		ev1 := workOrderEvent(key, "application/json", woJSON)
		first := call(t, g.HTTPAPI(handler), ev1)
		ev2 := workOrderEvent(key, "application/json", woJSON)
		second := call(t, g.HTTPAPI(handler), ev2)
		want := `{"error":"NO_PROJECT_PROCESSED",  "request_id": "` + ev2.RequestContext.RequestID + `", "message":"No project was processed."}`
		if first.StatusCode != 409 || !strings.Contains(first.Body, ev1.RequestContext.RequestID) ||
			second.StatusCode != 409 || second.Headers[erp.HeaderReplayed] != "true" || second.Body != want {
			t.Fatalf("replayed envelope:\n first %d %s\nsecond %d %v %s\n  want %s", first.StatusCode, first.Body, second.StatusCode, second.Headers, second.Body, want)
		}
		ev3 := workOrderEvent(key, "application/xml", woXML)
		ev3.Headers["accept"] = "application/xml"
		third := call(t, g.HTTPAPI(handler), ev3)
		if third.Headers[erp.HeaderReplayed] != "true" || !strings.Contains(third.Body, "<request_id>"+ev3.RequestContext.RequestID+"</request_id>") {
			t.Fatalf("replay as XML: %v %s, want request_id %s", third.Headers, third.Body, ev3.RequestContext.RequestID)
		}
		if rec := st.last(t, clk.Now()); rec.Response == nil || !strings.Contains(string(rec.Response.Body), ev1.RequestContext.RequestID) {
			t.Fatalf("stored response is not the handler's: %+v", rec.Response)
		}
		if runs != 1 {
			t.Fatalf("handler ran %d times, want 1", runs)
		}
	})
}

// TestERPResponseHeadersFirstAndReplay: the first request answers
// X-Request-ID and Idempotency-Original-Request-ID with its own id,
// Idempotency-Key with the key and Idempotency-Replayed: false; a replay
// answers X-Request-ID with its own (new) id, Idempotency-Original-Request-ID
// with the first request's, the key, and Idempotency-Replayed: true.
func TestERPResponseHeadersFirstAndReplay(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		key := erpKey()
		ev1, ev2 := guardEvent(key, `{"n":1}`), guardEvent(key, `{"n":1}`)
		first, replay := call(t, g.HTTPAPI(h.serve), ev1), call(t, g.HTTPAPI(h.serve), ev2)
		id1, id2 := ev1.RequestContext.RequestID, ev2.RequestContext.RequestID
		for _, c := range []struct {
			name           string
			r              events.APIGatewayV2HTTPResponse
			id, orig, repl string
		}{{"first", first, id1, id1, "false"}, {"replay", replay, id2, id1, "true"}} {
			h := c.r.Headers
			if h[erp.HeaderRequestID] != c.id || h[erp.HeaderOriginalRequestID] != c.orig || h[idem.HeaderKey] != key || h[erp.HeaderReplayed] != c.repl {
				t.Fatalf("%s: headers %v; want X-Request-ID %s, original %s, replayed %s", c.name, h, c.id, c.orig, c.repl)
			}
		}
		if first.Body != replay.Body {
			t.Fatalf("replay body %s, want %s", replay.Body, first.Body)
		}
	})
}

// TestERPLeaseExpiryMatchingHashTakesOwnership: while the lease is active a
// same-key request is in progress; after it expires a retry with the same
// canonical hash takes ownership (attempt 2, the first request id kept)
// and runs, a retry with another hash is a conflict and never takes over,
// and the stalled first owner can no longer complete.
func TestERPLeaseExpiryMatchingHashTakesOwnership(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := erpGuard(t, st, clk, func(c *idem.Config) { c.Lease = 30 * time.Second })
		key := erpKey()
		release, started := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		attempts := []int{}
		h := &countingHandler{before: func(ctx context.Context, n int32) {
			ci, _ := idem.FromContext(ctx)
			mu.Lock()
			attempts = append(attempts, ci.Attempt)
			mu.Unlock()
			if n == 1 {
				close(started)
				<-release
			}
		}}
		ev1 := guardEvent(key, `{"n":1}`)
		var stalled events.APIGatewayV2HTTPResponse
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			stalled, _ = g.HTTPAPI(h.serve)(ctxT(t), ev1)
		}()
		<-started
		if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"n":1}`)); r.StatusCode != 409 || erpError(t, r).Error != erp.CodeRequestInProgress {
			t.Fatalf("lease active: %d %s, want in progress", r.StatusCode, r.Body)
		}
		clk.Advance(31 * time.Second)
		if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"n":2}`)); r.StatusCode != 409 || erpError(t, r).Error != erp.CodeKeyConflict {
			t.Fatalf("lease expired, other hash: %d %s, want a conflict", r.StatusCode, r.Body)
		}
		retry := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"n":1}`))
		if retry.StatusCode != 201 || retry.Headers[erp.HeaderReplayed] != "false" || retry.Headers[erp.HeaderOriginalRequestID] != ev1.RequestContext.RequestID {
			t.Fatalf("lease expired, same hash: %d %v %s, want it to take ownership", retry.StatusCode, retry.Headers, retry.Body)
		}
		close(release)
		wg.Wait()
		if stalled.StatusCode != 409 || erpError(t, stalled).Error != erp.CodeRequestInProgress {
			t.Fatalf("stalled owner after the takeover: %d %s, want its completion fenced", stalled.StatusCode, stalled.Body)
		}
		rec := st.last(t, clk.Now())
		if rec.State != idem.StateCompleted || rec.Attempt != 2 || !strings.Contains(string(rec.Response.Body), `"execution":2`) {
			t.Fatalf("record %s attempt %d %s, want completed by attempt 2", rec.State, rec.Attempt, rec.Response.Body)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 2 {
			t.Fatalf("attempts %v, want [1 2]", attempts)
		}
	})
}

// TestERPRetentionDefault720Hours: a record is kept 720 hours (30 days)
// after its last write by default — the stored retention end and the
// table's TTL attribute — and IDEMPOTENCY_RETENTION_HOURS overrides it.
func TestERPRetentionDefault720Hours(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		env, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.RetentionHours: "48"}[k] })
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			g    *idem.Guard
			want time.Duration
		}{
			{"default", erpGuard(t, st, clk, nil), 720 * time.Hour},
			{"IDEMPOTENCY_RETENTION_HOURS=48", erpGuard(t, st, clk, env.Apply), 48 * time.Hour},
		} {
			if r := call(t, c.g.HTTPAPI((&countingHandler{}).serve), guardEvent(erpKey(), `{}`)); r.StatusCode != 201 {
				t.Fatalf("%s: %d %s", c.name, r.StatusCode, r.Body)
			}
			rec := st.last(t, clk.Now())
			if got := rec.Expires.Sub(clk.Now()); got != c.want {
				t.Fatalf("%s: retention %s, want %s", c.name, got, c.want)
			}
			if raw := v.raw(t, rec.ID); raw["expiresAt"] == nil {
				t.Fatalf("%s: no TTL attribute: %s", c.name, names(raw))
			}
		}
	})
}

// TestERPCanonicalHookReceivesDecodedRequestAndResolvedScope: the policy's
// canonical hash hook runs after decode, normalisation, validation and
// tenant resolution: it receives the decoded, normalised work order, the
// endpoint contract version and the scope resolved from the credential
// (client, company, organisation, method, route), and what it returns is
// what the record's digest hashes.
func TestERPCanonicalHookReceivesDecodedRequestAndResolvedScope(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		var mu sync.Mutex
		var seen []canon.Request
		p := erp.Policy
		p.Canonical = func(c canon.Request) ([]byte, error) {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
			return erp.Policy.Canonical(c)
		}
		g := workOrderGuard(t, st, clk, func(c *idem.Config) { c.Policy = p })
		key := erpKey()
		for _, ev := range []events.APIGatewayV2HTTPRequest{
			workOrderEvent(key, "application/json", woJSON),
			workOrderEvent(key, "text/xml", woXML),
		} {
			ev.Headers["authorization"] = "Bearer secret-token"
			if r := call(t, g.HTTPAPI((&woHandler{}).serve), ev); r.StatusCode != 201 {
				t.Fatalf("%s: %d %s", ev.Headers["content-type"], r.StatusCode, r.Body)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 2 {
			t.Fatalf("hook ran %d times, want 2", len(seen))
		}
		for i, c := range seen {
			wo, ok := c.Request.(workorder.WorkOrder)
			s := c.Scope
			if !ok || wo.Number != "WO-1" || len(wo.Projects) != 2 || wo.Projects[0].Code != "P-1" || wo.Projects[1].Name != "Valve" ||
				c.ContractVersion != workorder.Version || s.Tenant != "acme" || s.Method != "POST" || s.Operation != workorder.RouteLive ||
				s.Credential[erp.CredentialClient] != "erp-client" || s.Credential[erp.CredentialCompany] != "C100" ||
				s.Credential[erp.CredentialOrganization] != "ORG-1" || len(s.Credential) != 3 {
				t.Fatalf("hook call %d received %+v", i, c)
			}
		}
		b, err := erp.Policy.Canonical(seen[0])
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "secret-token") || strings.Contains(string(b), "erp-client") {
			t.Fatalf("canonical bytes carry what the policy excludes: %s", b)
		}

		// What the hook returns is what is compared: a hook that hashes
		// every work order alike makes another work order under the key a
		// replay.
		same := erp.Policy
		same.Canonical = func(canon.Request) ([]byte, error) { return []byte("one"), nil }
		g2 := workOrderGuard(t, st, clk, func(c *idem.Config) { c.Policy = same })
		h := &woHandler{}
		key2 := erpKey()
		call(t, g2.HTTPAPI(h.serve), workOrderEvent(key2, "application/json", woJSON))
		if r := call(t, g2.HTTPAPI(h.serve), workOrderEvent(key2, "application/xml", woXMLOther)); r.Headers[erp.HeaderReplayed] != "true" || h.runs.Load() != 1 {
			t.Fatalf("hook hashing alike, other work order: %d %v %s, want a replay", r.StatusCode, r.Headers, r.Body)
		}
	})
}

// TestERPRawBodySHA256BesideCanonicalHashAcrossFormats: a work order sent as
// JSON and replayed as the same work order in XML shares the canonical hash
// (canon.RecipeCanonical), while the record keeps the raw SHA-256 of the body that
// ran (the JSON one) for archive only.
func TestERPRawBodySHA256BesideCanonicalHashAcrossFormats(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := workOrderGuard(t, st, clk, nil)
		h := &woHandler{}
		key := erpKey()
		if r := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/json", woJSON)); r.StatusCode != 201 {
			t.Fatalf("JSON: %d %s", r.StatusCode, r.Body)
		}
		if r := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/xml", woXML)); r.Headers[erp.HeaderReplayed] != "true" {
			t.Fatalf("XML: %d %v %s, want a replay", r.StatusCode, r.Headers, r.Body)
		}
		rec := st.last(t, clk.Now())
		if rec.Digest == "" || rec.RawBodySHA256 != rawSHA256([]byte(woJSON)) ||
			rec.RawBodySHA256 == rawSHA256([]byte(woXML)) {
			t.Fatalf("digest %q raw %q, want the canonical hash and the JSON body's raw SHA-256", rec.Digest, rec.RawBodySHA256)
		}
		if raw := v.raw(t, rec.ID); raw["rawBodySha256"] == nil {
			t.Fatalf("no rawBodySha256 attribute: %s", names(raw))
		}
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

// TestERPInProgressAnsweredAtOnce: under the ERP policy a duplicate of a
// request still processing is answered 409 IDEMPOTENCY_REQUEST_IN_PROGRESS
// with Retry-After: 2 at once, never held on the first request: its caller
// waits the Retry-After and retries. The guard is configured to wait an
// hour and the call's deadline is far away; the answer comes before either
// and the first request is still running when it does; the duplicate
// never polls the record.
func TestERPInProgressAnsweredAtOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		gets := &getCounter{Store: v.s}
		g := erpGuard(t, gets, clk, func(c *idem.Config) { c.Wait = time.Hour })
		key := erpKey()
		release, started := make(chan struct{}), make(chan struct{})
		h := &countingHandler{before: func(_ context.Context, n int32) {
			if n == 1 {
				close(started)
				<-release
			}
		}}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = g.HTTPAPI(h.serve)(ctxT(t), guardEvent(key, `{"n":1}`))
		}()
		defer wg.Wait()
		defer close(release)
		<-started
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := g.HTTPAPI(h.serve)(ctx, guardEvent(key, `{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if n := gets.n.Load(); n != 0 {
			t.Fatalf("the duplicate was held, polling the record %d times", n)
		}
		select {
		case <-release:
			t.Fatal("the duplicate was answered after the first request ended")
		default:
		}
		if env := erpError(t, r); r.StatusCode != 409 || env.Error != erp.CodeRequestInProgress || r.Headers[idem.HeaderRetryAfter] != "2" {
			t.Fatalf("in progress: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
	})
}

// getCounter counts the Store's Get calls (a held duplicate polls with
// them).
type getCounter struct {
	idem.Store
	n atomic.Int32
}

func (c *getCounter) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, id, now)
}
