package apifn

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
	"github.com/idemkit/idemkit/ledger/semantic"
)

type fixture struct {
	h      *Handler
	runs   *runs.MemRuns
	ledger *ledger.Ledger
	slept  chan time.Duration
}

// newFixture is the api handler over runs in memory whose sleeps are
// reported on f.slept, never slept.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return hostOf(t, runs.NewMemRuns(), idem.Config{}, func(f *fixture, c *Config) {
		f.slept = make(chan time.Duration, 100)
		c.Test = TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(ctx context.Context, d time.Duration) error {
			f.slept <- d
			return nil
		}}}
	})
}

// hostOf is the api handler over rs (f.runs too when rs is in memory). Its
// Guard is idem.New(gc), with the authorizer's tenantId, the memory store
// and a discarded log where gc leaves them unset; its ledger is in memory.
// adjust, if set, changes f and the handler's Config before New.
func hostOf(t *testing.T, rs runs.RunStore, gc idem.Config, adjust func(f *fixture, c *Config)) *fixture {
	t.Helper()
	if gc.Tenant == (idem.TenantSource{}) {
		gc.Tenant = idem.AuthorizerKey("tenantId")
	}
	if gc.Store == nil {
		gc.Store = idemmem.New()
	}
	if gc.Logger == nil {
		gc.Logger = discard()
	}
	g, err := idem.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ledger: l}
	f.runs, _ = rs.(*runs.MemRuns)
	c := Config{Runs: rs, Guard: g, Ledger: l, Logger: discard()}
	if adjust != nil {
		adjust(f, &c)
	}
	if f.h, err = New(c); err != nil {
		t.Fatal(err)
	}
	return f
}

func ev(method, rawPath, tenant, key, body string) events.APIGatewayV2HTTPRequest {
	e := events.APIGatewayV2HTTPRequest{RawPath: rawPath, Body: body, Headers: map[string]string{}}
	e.RequestContext.HTTP.Method = method
	e.RequestContext.HTTP.Path = rawPath
	e.RequestContext.DomainName = "api.example.com"
	e.RequestContext.RequestID = "req-" + key
	if body != "" {
		e.Headers["content-type"] = "application/json"
	}
	if key != "" {
		e.Headers["idempotency-key"] = key
	}
	if tenant != "" {
		e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": tenant}}
	}
	return e
}

// sameAnswer holds the answers of one refusal sent several ways to one
// body: the first answer's.
type sameAnswer struct{ first string }

// check fails the test (what names the way) when body is not the first
// answer's.
func (a *sameAnswer) check(t *testing.T, what, body string) {
	t.Helper()
	if a.first == "" {
		a.first = body
	} else if body != a.first {
		t.Errorf("%s: %s, another answer than %s", what, body, a.first)
	}
}

// withContentType is e with Content-Type ct, or with none when ct is "".
func withContentType(e events.APIGatewayV2HTTPRequest, ct string) events.APIGatewayV2HTTPRequest {
	delete(e.Headers, "content-type")
	if ct != "" {
		e.Headers["content-type"] = ct
	}
	return e
}

func (f *fixture) do(t *testing.T, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	r, err := f.h.Handle(context.Background(), e)
	if err != nil {
		t.Fatalf("Handle returned an error: %v", err)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	return r, m
}

const key1 = "k-0123456789abcdefghijkl"

func TestRoutingErrors(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/nope", 404, "not_found", ""},
		{"GET", "/runs/a/b/c/d", 404, "not_found", ""},
		{"DELETE", "/runs", 405, CodeMethodNotAllowed, "POST"},
		{"GET", "/runs", 404, "not_found", ""}, // listRuns, unadvertised (runs.md: 404)
		{"POST", "/runs/acme~2Fabcdefghijklmnopqr", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{"DELETE", "/runs/acme~2Fabcdefghijklmnopqr", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/runs/acme~2Fabcdefghijklmnopqr/cancel", 405, CodeMethodNotAllowed, "POST"},
		{"PUT", "/runs/acme~2Fabcdefghijklmnopqr/effects", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{"POST", "/.well-known/openwop", 405, CodeMethodNotAllowed, "GET, HEAD"},
		{"GET", "/runs/acme~2Gabcdefghijklmnopqr", 400, "validation_error", ""},
		{"GET", "/runs/acme~2", 400, "validation_error", ""},
		{"GET", "/runs/short", 400, "validation_error", ""},
	}
	for _, c := range cases {
		r, m := f.do(t, ev(c.method, c.path, "acme", "", ""))
		if r.StatusCode != c.status || m["error"] != c.code || m["message"] == nil {
			t.Errorf("%s %s: %d %v, want %d %s", c.method, c.path, r.StatusCode, m, c.status, c.code)
		}
		if c.allow != "" && r.Headers["Allow"] != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, r.Headers["Allow"], c.allow)
		}
	}
	// Unauthenticated mutating and reading routes.
	for _, e := range []events.APIGatewayV2HTTPRequest{
		ev("POST", "/runs", "", key1, `{"workflowId":"conformance-noop"}`),
		ev("GET", "/runs/acme~2Fabcdefghijklmnopqr", "", "", ""),
	} {
		r, m := f.do(t, e)
		if r.StatusCode != 401 || m["error"] != "unauthenticated" {
			t.Errorf("%s: %d %v", e.RawPath, r.StatusCode, m)
		}
		// HTTP: a 401 names the scheme a client must use (RFC 9110 §11.6.1).
		if got := r.Headers["WWW-Authenticate"]; got != wwwAuthenticate {
			t.Errorf("%s: WWW-Authenticate %q, want %q", e.RawPath, got, wwwAuthenticate)
		}
	}
}

func TestCapabilities(t *testing.T) {
	f := newFixture(t)
	r, m := f.do(t, ev("GET", "/.well-known/openwop", "", "", ""))
	if r.StatusCode != 200 || r.Headers["OpenWOP-Version"] == "" {
		t.Fatalf("%d %v", r.StatusCode, r.Headers)
	}
	idp, _ := m["idempotency"].(map[string]any)
	if idp["crossRegion"] != "single-region" || idp["status"] == nil || idp["witness"] == nil || idp["multiRegion"] != nil {
		t.Fatalf("idempotency family %v", idp)
	}
}

func TestCreateRunReplay(t *testing.T) {
	f := newFixture(t)
	body := `{"workflowId":"conformance-noop","inputs":{}}`
	r1, m1 := f.do(t, ev("POST", "/runs", "acme", key1, body))
	r2, m2 := f.do(t, ev("POST", "/runs", "acme", key1, body))
	if r1.StatusCode != 201 || r2.StatusCode != 201 || m1["runId"] != m2["runId"] || r1.Body != r2.Body {
		t.Fatalf("%d %v / %d %v", r1.StatusCode, m1, r2.StatusCode, m2)
	}
	if header.First(r1.Headers, "OpenWOP-Idempotent-Replay") != "" || header.First(r2.Headers, "OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay markers %q %q", header.First(r1.Headers, "OpenWOP-Idempotent-Replay"), header.First(r2.Headers, "OpenWOP-Idempotent-Replay"))
	}
	if f.runs.Len() != 1 {
		t.Fatalf("%d runs", f.runs.Len())
	}
	id, _ := m1["runId"].(string)
	// The run records the recipe stamps it was created with, and getRun
	// shows them (RFC 0150 §E).
	if stored, err := f.runs.Get(context.Background(), id); err != nil || stored.Stamps != identity.CurrentStamps() {
		t.Fatalf("stored run %+v %v", stored, err)
	}
	if _, g := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", "")); runExt(g)["activityIdentityRecipe"] != identity.ActivityRecipe ||
		runExt(g)["semanticRequestRecipe"] != semantic.RecipeV2 {
		t.Fatalf("getRun %v", g)
	}
	if !runs.ValidRunID(id) || runs.RunTenant(id) != "acme" || m1["status"] != "pending" ||
		!strings.HasPrefix(m1["eventsUrl"].(string), "https://api.example.com/runs/acme~2F") {
		t.Fatalf("body %v", m1)
	}
	// A different body under the same key: 409 mismatch, never the cached body.
	r3, m3 := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-delay","inputs":{}}`))
	if r3.StatusCode != 409 || m3["error"] != "idempotency_key_mismatch" || m3["runId"] != nil {
		t.Fatalf("%d %v", r3.StatusCode, m3)
	}
	// Another tenant with the same key gets its own run.
	r4, m4 := f.do(t, ev("POST", "/runs", "globex", key1, body))
	if r4.StatusCode != 201 || m4["runId"] == m1["runId"] || header.First(r4.Headers, "OpenWOP-Idempotent-Replay") != "" {
		t.Fatalf("%d %v", r4.StatusCode, m4)
	}
}

func TestCreateRunParallelDuplicates(t *testing.T) {
	f := newFixture(t)
	body := `{"workflowId":"conformance-noop","inputs":{"n":1}}`
	const n = 24
	var wg sync.WaitGroup
	ids := make(chan string, n)
	codes := make(chan int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.h.Handle(context.Background(), ev("POST", "/runs", "acme", key1, body))
			if err != nil {
				t.Error(err)
				return
			}
			codes <- r.StatusCode
			var m map[string]any
			_ = json.Unmarshal([]byte(r.Body), &m)
			if id, ok := m["runId"].(string); ok {
				ids <- id
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(codes)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	for c := range codes {
		if c != 201 && c != 409 {
			t.Errorf("status %d", c)
		}
	}
	if len(seen) != 1 || f.runs.Len() != 1 {
		t.Fatalf("%d distinct runIds, %d runs: want exactly one", len(seen), f.runs.Len())
	}
}

func TestCreateRunValidationAndUnavailable(t *testing.T) {
	f := newFixture(t)
	for _, b := range []string{`{"inputs":{}}`, `[]`, `{"workflowId":"nope"}`, `{"workflowId":"conformance-delay","inputs":{"delayMs":10001}}`,
		`{"workflowId":`, `not json`, `{"workflowId":"conformance-noop"} trailing`, `{"workflowId":"conformance-delay","inputs":{"delayMs":"5"}}`,
		`{"workflowId":"conformance-noop","inputs":3}`, `{"workflowId":"webhook","inputs":{}}`} {
		r, m := f.do(t, ev("POST", "/runs", "acme", key1, b))
		if r.StatusCode != 400 || m["error"] != "validation_error" {
			t.Errorf("%s: %d %v", b, r.StatusCode, m)
		}
	}
	// validation_error is not cached: the same key then creates a run.
	if r, _ := f.do(t, ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop"}`)); r.StatusCode != 201 {
		t.Fatalf("after 400: %d", r.StatusCode)
	}
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost/x", "http://169.254.169.254/latest", "ftp://example.com/", "http://10.0.0.1/"} {
		r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"webhook","inputs":{"url":"`+u+`"}}`))
		if r.StatusCode != 400 || m["error"] != "webhook_url_rejected" {
			t.Errorf("%s: %d %v", u, r.StatusCode, m)
		}
		// The 400's details.field names the field when there is one
		// (openapi.json, InvalidRequest).
		if d, _ := m["details"].(map[string]any); d["field"] != "inputs.url" {
			t.Errorf("%s: details %v, want field inputs.url", u, m["details"])
		}
	}
	const key2 = "k2-0123456789abcdefghijkl"
	for i := 0; i < 2; i++ { // 503 is never replayed: the retry re-executes
		r, m := f.do(t, ev("POST", "/runs", "acme", key2, `{"workflowId":"conformance-unavailable"}`))
		if r.StatusCode != 503 || m["error"] != "runner_unavailable" || header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "" {
			t.Fatalf("try %d: %d %v %v", i, r.StatusCode, m, r.Headers)
		}
	}
	if f.runs.Len() != 1 {
		t.Fatalf("%d runs", f.runs.Len())
	}
	if r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-delay","inputs":{"delayMs":1500}}`)); r.StatusCode != 201 {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	if d := <-f.slept; d != 1500*time.Millisecond {
		t.Fatalf("held %s", d)
	}
	// The bound itself (10000 ms) is accepted.
	if r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-delay","inputs":{"delayMs":10000}}`)); r.StatusCode != 201 {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	if d := <-f.slept; d != 10*time.Second {
		t.Fatalf("held %s", d)
	}
	// 503 and 400s created nothing: exactly the three 201s above are runs.
	if f.runs.Len() != 3 {
		t.Fatalf("%d runs", f.runs.Len())
	}
	e := ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`)
	e.Headers["content-type"] = "text/plain"
	if r, m := f.do(t, e); r.StatusCode != 415 || m["error"] != "unsupported_media_type" {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
	// JSON is UTF-8: a body declared in another charset is refused, never
	// read as UTF-8; charset=utf-8 in any letter case, quoted or not, is
	// accepted (its 201 is checked by the run count below).
	for _, ct := range []string{"application/json; charset=latin-1", "application/json; charset=ISO-8859-1", "application/json; charset=utf-16", "application/json; charset=utf8"} {
		e := ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`)
		e.Headers["content-type"] = ct
		if r, m := f.do(t, e); r.StatusCode != 415 || m["error"] != "unsupported_media_type" || !strings.Contains(fmt.Sprint(m["message"]), "UTF-8") {
			t.Fatalf("%s: %d %v", ct, r.StatusCode, m)
		}
	}
	for _, ct := range []string{"application/json; charset=UTF-8", `application/json; charset="utf-8"`} {
		e := ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`)
		e.Headers["content-type"] = ct
		if r, m := f.do(t, e); r.StatusCode != 201 {
			t.Fatalf("%s: %d %v", ct, r.StatusCode, m)
		}
	}
	if f.runs.Len() != 5 {
		t.Fatalf("%d runs", f.runs.Len())
	}
	big := ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop","inputs":{"x":"`+strings.Repeat("a", MaxBodyBytes)+`"}}`)
	if r, m := f.do(t, big); r.StatusCode != 413 || m["error"] != "payload_too_large" {
		t.Fatalf("%d %v", r.StatusCode, m)
	}
}

func TestGetRunTenantBinding(t *testing.T) {
	f := newFixture(t)
	_, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop","inputs":{"secret":"s3cr3t"}}`))
	id := m["runId"].(string)
	opaque := id[len("acme/"):]
	for _, p := range []string{"/runs/" + runs.ProjectID(id), "/runs/acme%2F" + opaque, "/runs/acme%2f" + opaque, "/runs/acme/" + opaque} {
		r, g := f.do(t, ev("GET", p, "acme", "", ""))
		if r.StatusCode != 200 || g["runId"] != id || g["status"] != "pending" {
			t.Errorf("%s: %d %v", p, r.StatusCode, g)
		}
	}
	// Another tenant: 403 id_tenant_mismatch on every route, in every
	// encoding of the id, and no data.
	var others []events.APIGatewayV2HTTPRequest
	for _, enc := range []string{runs.ProjectID(id), "acme%2F" + opaque, "acme%2f" + opaque, "acme/" + opaque} {
		others = append(others,
			ev("GET", "/runs/"+enc, "globex", "", ""),
			ev("GET", "/runs/"+enc+"/effects", "globex", "", ""),
			ev("POST", "/runs/"+enc+"/cancel", "globex", key1, `{}`))
	}
	for _, e := range others {
		r, g := f.do(t, e)
		if r.StatusCode != 403 || g["error"] != "id_tenant_mismatch" || strings.Contains(r.Body, opaque) || strings.Contains(r.Body, "s3cr3t") {
			t.Errorf("%s %s: %d %s", e.RequestContext.HTTP.Method, e.RawPath, r.StatusCode, r.Body)
		}
	}
	// Failed executions left to the stream's retries show on the snapshot.
	if _, err := f.runs.NoteFailure(context.Background(), id, "effect in flight", time.Now()); err != nil {
		t.Fatal(err)
	}
	// A parked run shows its effect's retry schedule.
	wakeAt := time.Now().Add(30 * time.Second).UTC().Truncate(time.Millisecond)
	if err := f.runs.Schedule(context.Background(), id, runs.Wake{At: wakeAt, Attempt: 1, MaxAttempts: 20, Deadline: wakeAt.Add(time.Hour)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, g := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", ""))
	if runExt(g)["failures"] != 1.0 || runExt(g)["lastError"] != "effect in flight" {
		t.Fatalf("snapshot %v", g)
	}
	if rt, _ := runExt(g)["retry"].(map[string]any); rt["nextAttemptAt"] != wakeAt.Format(time.RFC3339Nano) || rt["attempt"] != 1.0 ||
		rt["maxAttempts"] != 20.0 || rt["budgetEndsAt"] == nil {
		t.Fatalf("retry extension %v", rt)
	}
	// A well-formed id of the caller's tenant that does not exist: 404.
	if r, g := f.do(t, ev("GET", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz", "acme", "", "")); r.StatusCode != 404 || g["error"] != "not_found" {
		t.Fatalf("%d %v", r.StatusCode, g)
	}
	if st, _ := f.runs.Get(context.Background(), id); st.Status != runs.StatusPending {
		t.Fatalf("another tenant's cancel changed the run: %s", st.Status)
	}
	if r, _ := f.do(t, ev("GET", "/runs/acme~2Fzzzzzzzzzzzzzzzzzzzz/effects", "acme", "", "")); r.StatusCode != 404 {
		t.Fatalf("effects of a missing run: %d", r.StatusCode)
	}
}

func TestCancelRun(t *testing.T) {
	f := newFixture(t)
	_, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
	id := m["runId"].(string)
	path := "/runs/" + runs.ProjectID(id) + "/cancel"
	r1, c1 := f.do(t, ev("POST", path, "acme", key1, `{"reason":"x"}`))
	r2, _ := f.do(t, ev("POST", path, "acme", key1, `{"reason":"x"}`))
	if r1.StatusCode != 200 || c1["status"] != "cancelled" || header.First(r2.Headers, "OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("%d %v / %v", r1.StatusCode, c1, r2.Headers)
	}
	// A cancelled run is terminal: another cancel (a new key, or none) is
	// refused 409 run_terminal, never a 200 echoing the terminal state
	// (runs.md §Cancel); the key's replay above stays the first answer.
	for _, k := range []string{"", "k-fedcba9876543210zyxwvu"} {
		if r, c := f.do(t, ev("POST", path, "acme", k, "")); r.StatusCode != 409 || c["error"] != "run_terminal" ||
			!strings.Contains(c["message"].(string), "cancelled") {
			t.Fatalf("cancel of a cancelled run (key %q): %d %s, want 409 run_terminal", k, r.StatusCode, r.Body)
		}
	}
}

// TestOneKeyOnTwoRunsCancelIsKeyMismatch: the host's Layer-1 scope is the
// route, as in the library: the operation is the route template and the
// run id is in the request fingerprint, so one key reused on another run's
// cancel is 409 idempotency_key_mismatch and that run is not cancelled.
func TestOneKeyOnTwoRunsCancelIsKeyMismatch(t *testing.T) {
	f := newFixture(t)
	_, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
	_, m2 := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
	id, id2 := m["runId"].(string), m2["runId"].(string)
	if r, c := f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+"/cancel", "acme", key1, `{}`)); r.StatusCode != 200 || c["status"] != "cancelled" {
		t.Fatalf("first cancel: %d %v", r.StatusCode, c)
	}
	r, c := f.do(t, ev("POST", "/runs/"+runs.ProjectID(id2)+"/cancel", "acme", key1, `{}`))
	if r.StatusCode != 409 || c["error"] != "idempotency_key_mismatch" {
		t.Fatalf("same key on another run's cancel: %d %v, want 409 idempotency_key_mismatch", r.StatusCode, c)
	}
	if st, _ := f.runs.Get(context.Background(), id2); st.Status != runs.StatusPending {
		t.Fatalf("the second run was cancelled by a reused key: %s", st.Status)
	}
	if r, _ := f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+"/cancel", "acme", key1, `{}`)); r.StatusCode != 200 ||
		header.First(r.Headers, "OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("same key, same run: %d %v (want a replay)", r.StatusCode, r.Headers)
	}
}

// TestWebhookLoopbackFlag: loopback destinations are refused with
// webhook_url_rejected unless the policy allows them (idemkit dev
// --allow-loopback-webhooks sets AllowLoopback); private and metadata
// addresses stay refused even then.
func TestWebhookLoopbackFlag(t *testing.T) {
	f := newFixture(t)
	body := `{"workflowId":"webhook","inputs":{"url":"http://127.0.0.1:9/hook","payload":{"a":1}}}`
	if r, m := f.do(t, ev("POST", "/runs", "acme", "", body)); r.StatusCode != 400 || m["error"] != "webhook_url_rejected" {
		t.Fatalf("%d %v", r.StatusCode, m)
	} else if msg, _ := m["message"].(string); !strings.Contains(msg, "WEBHOOK_ALLOW_LOOPBACK") || !strings.Contains(msg, "--allow-loopback-webhooks") {
		t.Fatalf("the refusal does not say what admits a loopback destination: %q", msg)
	}
	f.h.cfg.Webhook.AllowLoopback = true
	if r, m := f.do(t, ev("POST", "/runs", "acme", "", body)); r.StatusCode != 201 {
		t.Fatalf("with AllowLoopback: %d %v", r.StatusCode, m)
	}
	for _, u := range []string{"http://169.254.169.254/latest/meta-data", "http://10.0.0.1/"} {
		if r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"webhook","inputs":{"url":"`+u+`"}}`)); r.StatusCode != 400 || m["error"] != "webhook_url_rejected" {
			t.Fatalf("%s with AllowLoopback: %d %v", u, r.StatusCode, m)
		}
	}
	// An allowlist refuses other hosts.
	f.h.cfg.Webhook = webhook.WebhookPolicy{Allow: []string{"hooks.example.com"}}
	if r, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"webhook","inputs":{"url":"https://evil.example.net/"}}`)); r.StatusCode != 400 || m["error"] != "webhook_url_rejected" {
		t.Fatalf("allowlist: %d %v", r.StatusCode, m)
	}
	if r, _ := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"webhook","inputs":{"url":"https://hooks.example.com/x"}}`)); r.StatusCode != 201 {
		t.Fatalf("allowlisted host: %d", r.StatusCode)
	}
}

// A run that completed after executions failed transiently never reads as
// failed: no failures/lastError, the earlier ones named as recovered, no
// retry schedule.
func TestCompletedRunSnapshotIsUnambiguous(t *testing.T) {
	f := newFixture(t)
	_, m := f.do(t, ev("POST", "/runs", "acme", "k-0123456789abcdefghijklmn", `{"workflowId":"conformance-noop"}`))
	id := m["runId"].(string)
	ctx := context.Background()
	if _, err := f.runs.Transition(ctx, id, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runs.NoteFailure(ctx, id, "webhook answered 503", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.runs.Schedule(ctx, id, runs.Wake{At: time.Now().Add(time.Minute), Attempt: 1, MaxAttempts: 20}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runs.Transition(ctx, id, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, g := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", ""))
	x := runExt(g)
	if g["status"] != "completed" || g["error"] != nil || x["failures"] != nil || x["lastError"] != nil || x["retry"] != nil ||
		x["recoveredFailures"] != 1.0 || x["lastRecoveredError"] != "webhook answered 503" {
		t.Fatalf("snapshot %v", g)
	}
}
