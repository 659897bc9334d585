package apifn

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// TestPollStreamModeRefusalNamesTheModes: GET /runs/{runId}/events/poll
// takes streamMode as GET /runs/{runId}/events does, and refuses a value
// outside its pattern with the same answer: 400 unsupported_stream_mode
// whose details.supported lists each mode this host serves (the registry
// row requires details.supported), decided before the run is read.
func TestPollStreamModeRefusalNamesTheModes(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	for _, id := range []string{r.ID, "acme/zzzzzzzzzzzzzzzzzzzz"} {
		path := "/runs/" + runs.ProjectID(id) + "/events/poll"
		for _, q := range []string{"streamMode=", "streamMode=foo", "streamMode=values,updates",
			"streamMode=updates,", "streamMode=debug&streamMode=debug", "afterSequence=0&streamMode=Updates"} {
			resp, m := f.do(t, eventsReq(path, "acme", q, ""))
			if resp.StatusCode != 400 || m["error"] != CodeUnsupportedStreamMode || m["message"] == "" ||
				resp.Headers["Content-Type"] != "application/json" {
				t.Fatalf("%s?%s: %d %s", path, q, resp.StatusCode, resp.Body)
			}
			details, _ := m["details"].(map[string]any)
			if sup, _ := details["supported"].([]any); !reflect.DeepEqual(sup, []any{"values", "updates", "messages", "debug"}) {
				t.Fatalf("%s?%s: details %v, want supported [values updates messages debug]", path, q, m["details"])
			}
		}
	}
}

// TestJSONBodiesAreStrictWhateverTheHeaders: a body createRun, cancelRun or
// forkRun parses as JSON that is JSON text but not I-JSON (a member name
// twice, bytes that are not UTF-8, a lone surrogate escape) or that has a
// number no double holds (at all, or exactly) is 400 validation_error,
// the same answer with or without an Idempotency-Key and with or without
// Content-Type: application/json, and nothing is created or cancelled. A
// run's inputs are never another text than the one sent (a store that
// keeps UTF-8 text would replace invalid bytes), and no member is chosen
// among duplicates.
func TestJSONBodiesAreStrictWhateverTheHeaders(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	live := f.newRun(t, "acme")
	cases := []struct{ name, path, body string }{
		{"create: workflowId twice", "/runs", `{"workflowId":"webhook","workflowId":"conformance-noop"}`},
		{"create: an inputs member twice", "/runs", `{"workflowId":"conformance-noop","inputs":{"a":1,"a":2}}`},
		{"create: invalid UTF-8", "/runs", "{\"workflowId\":\"conformance-noop\",\"inputs\":{\"s\":\"a\xffb\"}}"},
		{"create: invalid UTF-8 in a name", "/runs", "{\"workflowId\":\"conformance-noop\",\"inputs\":{\"\xfe\":1}}"},
		{"create: lone surrogate", "/runs", `{"workflowId":"conformance-noop","inputs":{"s":"\ud800"}}`},
		{"create: number out of range", "/runs", `{"workflowId":"conformance-noop","inputs":{"n":1e400}}`},
		{"create: inexact number", "/runs", `{"workflowId":"conformance-noop","inputs":{"n":12345678901234567891}}`},
		{"cancel: reason twice", "/runs/" + runs.ProjectID(live.ID) + "/cancel", `{"reason":"a","reason":"b"}`},
		{"cancel: invalid UTF-8", "/runs/" + runs.ProjectID(live.ID) + "/cancel", "{\"reason\":\"\xff\"}"},
		{"cancel: lone surrogate", "/runs/" + runs.ProjectID(live.ID) + "/cancel", `{"reason":"\udc00"}`},
		{"fork: mode twice", forkPath(src.ID), `{"mode":"branch","mode":"replay"}`},
		{"fork: fromSeq twice", forkPath(src.ID), `{"mode":"branch","fromSeq":1,"fromSeq":2}`},
		// Not JSON text: a closing bracket too many (a body tenant behind
		// it must not pass unread either), trailing text.
		{"create: a brace too many", "/runs", `{"workflowId":"conformance-noop"}}`},
		{"create: a bracket too many, another tenant", "/runs", `{"workflowId":"conformance-noop","tenantId":"globex"}]`},
		{"create: trailing text", "/runs", `{"workflowId":"conformance-noop"} x`},
		{"fork: a brace too many", forkPath(src.ID), `{"mode":"branch"}}`},
	}
	before := f.runs.Len()
	n := 0
	for _, c := range cases {
		var first sameAnswer
		for _, keyed := range []bool{true, false} {
			for _, ct := range []string{"application/json", ""} {
				n++
				key := ""
				if keyed {
					key = fmt.Sprintf("k-strict-json-%010d", n)
				}
				e := withContentType(ev("POST", c.path, "acme", key, c.body), ct)
				resp, m := f.do(t, e)
				if resp.StatusCode != 400 || m["error"] != "validation_error" {
					t.Errorf("%s (key %v, Content-Type %q): %d %s", c.name, keyed, ct, resp.StatusCode, resp.Body)
					continue
				}
				first.check(t, fmt.Sprintf("%s (key %v, Content-Type %q)", c.name, keyed, ct), resp.Body)
			}
		}
	}
	if got := f.runs.Len(); got != before {
		t.Errorf("%d runs created", got-before)
	}
	if r, err := f.runs.Get(context.Background(), live.ID); err != nil || r.Status != runs.StatusPending {
		t.Errorf("the live run: %v %v, want pending", r.Status, err)
	}
}

// TestMethodsAreCaseSensitive: an HTTP method is case-sensitive (RFC 9110
// section 9.1), so `post` is no route's method: the handler, which Lambda
// runs behind the HTTP API, answers a method not in upper case on a known
// path 405 idemkit.method_not_allowed with the route's Allow, before any
// credential (a valid one is never told 401) and without running it, as
// `idemkit dev` does; on an unknown path it is 404.
func TestMethodsAreCaseSensitive(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	p := "/runs/" + runs.ProjectID(r.ID)
	before := f.runs.Len()
	cases := []struct {
		method, path, tenant, key, body string
		status                          int
		allow                           string
	}{
		{"post", "/runs", "acme", "k-lowercase-method-0000001", `{"workflowId":"conformance-noop"}`, 405, "POST"},
		{"Post", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`, 405, "POST"},
		{"post", "/runs", "", "", `{"workflowId":"conformance-noop"}`, 405, "POST"},
		{"post", p + "/cancel", "acme", "k-lowercase-method-0000002", "", 405, "POST"},
		{"get", p, "acme", "", "", 405, "GET, HEAD"},
		{"head", p, "acme", "", "", 405, "GET, HEAD"},
		{"get", p + "/events", "acme", "", "", 405, "GET, HEAD"},
		{"get", "/.well-known/openwop", "", "", "", 405, "GET, HEAD"},
		{"get", "/nope", "acme", "", "", 404, ""},
	}
	for _, c := range cases {
		resp, m := f.do(t, ev(c.method, c.path, c.tenant, c.key, c.body))
		if resp.StatusCode != c.status || resp.Headers["Allow"] != c.allow {
			t.Errorf("%s %s: %d Allow %q %s, want %d Allow %q", c.method, c.path, resp.StatusCode, resp.Headers["Allow"], resp.Body, c.status, c.allow)
			continue
		}
		want := CodeMethodNotAllowed
		if c.status == 404 {
			want = "not_found"
		}
		if m["error"] != want || m["message"] == "" {
			t.Errorf("%s %s: %s, want %s", c.method, c.path, resp.Body, want)
		}
	}
	if got := f.runs.Len(); got != before {
		t.Errorf("%d runs created", got-before)
	}
	if got, _ := f.runs.Get(context.Background(), r.ID); got.Status != runs.StatusPending {
		t.Errorf("run %s, want pending", got.Status)
	}
}

// TestAnotherTenantsRunIsOneAnswerOnEveryRoute: on every route with a
// {runId}, a runId whose tenant segment is not the caller's is 403
// id_tenant_mismatch (runs.md: "MUST NOT disclose whether the run
// exists"): the same answer, byte for byte, for another tenant's run that
// exists and for one that does not, in every projection of the id (~2F,
// %2F, %2f, the split form), and nothing is created or cancelled.
func TestAnotherTenantsRunIsOneAnswerOnEveryRoute(t *testing.T) {
	f := newFixture(t)
	theirs := sourceRun(t, f, "globex", runs.StatusFailed)
	ghost := "globex/" + strings.Repeat("z", len(theirs.ID)-len("globex/"))
	before := f.runs.Len()
	projections := map[string]func(id string) string{
		"~2F":   runs.ProjectID,
		"%2F":   func(id string) string { return strings.Replace(id, "/", "%2F", 1) },
		"%2f":   func(id string) string { return strings.Replace(id, "/", "%2f", 1) },
		"split": func(id string) string { return id },
	}
	n := 0
	for _, r := range Routes {
		if !strings.Contains(r.Pattern, "{runId}") {
			continue
		}
		for pname, project := range projections {
			var first string
			for _, id := range []string{theirs.ID, ghost} {
				n++
				path := strings.Replace(r.Pattern, "{runId}", project(id), 1)
				body := ""
				if r.Method == "POST" {
					body = `{"mode":"replay"}`
					if !strings.HasSuffix(r.Pattern, ":fork") {
						body = `{}`
					}
				}
				resp, m := f.do(t, ev(r.Method, path, "acme", fmt.Sprintf("k-other-tenant-%010d", n), body))
				if r.Method == http.MethodHead {
					// GET's status without content (RFC 9110 §9.3.2).
					if resp.StatusCode != 403 || resp.Body != "" {
						t.Errorf("%s %s: %d %q, want 403 without content", r.Method, path, resp.StatusCode, resp.Body)
					}
					continue
				}
				if resp.StatusCode != 403 || m["error"] != "id_tenant_mismatch" {
					t.Errorf("%s %s: %d %s, want 403 id_tenant_mismatch", r.Method, path, resp.StatusCode, resp.Body)
					continue
				}
				if first == "" {
					first = resp.Body
				} else if resp.Body != first {
					t.Errorf("%s %s (%s): %s differs from the answer for the run that exists, %s", r.Method, path, pname, resp.Body, first)
				}
			}
		}
	}
	if n < 2*len(projections)*7 {
		t.Errorf("%d requests: the route table has fewer {runId} routes than this test knows", n)
	}
	if got := f.runs.Len(); got != before {
		t.Errorf("%d runs created", got-before)
	}
	if got, _ := f.runs.Get(context.Background(), theirs.ID); got.Status != runs.StatusFailed {
		t.Errorf("their run is %s, want failed", got.Status)
	}
}

// TestBodyTenantIsRefusedWhateverTheContentType: with the Guard's
// BodyTenantField set (the deployed stack's "tenantId"), a createRun,
// cancelRun or forkRun body naming another tenant is 403 forbidden
// (details.reason tenant_mismatch), the same answer with or without an
// Idempotency-Key and with or without Content-Type: application/json
// (these routes read their body as JSON either way), and nothing is
// created or cancelled; the caller's own tenant in the body is accepted.
func TestBodyTenantIsRefusedWhateverTheContentType(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{BodyTenantField: "tenantId"}, nil)
	src := sourceRun(t, f, "acme", runs.StatusCompleted)
	live := f.newRun(t, "acme")
	cases := []struct{ name, path, body string }{
		{"create", "/runs", `{"workflowId":"conformance-noop","tenantId":"globex"}`},
		{"cancel", "/runs/" + runs.ProjectID(live.ID) + "/cancel", `{"reason":"r","tenantId":"globex"}`},
		{"fork", forkPath(src.ID), `{"mode":"replay","tenantId":"globex"}`},
	}
	before := f.runs.Len()
	n := 0
	for _, c := range cases {
		var first sameAnswer
		for _, keyed := range []bool{true, false} {
			for _, ct := range []string{"application/json", ""} {
				n++
				key := ""
				if keyed {
					key = fmt.Sprintf("k-body-tenant-%010d", n)
				}
				e := withContentType(ev("POST", c.path, "acme", key, c.body), ct)
				resp, m := f.do(t, e)
				details, _ := m["details"].(map[string]any)
				if resp.StatusCode != 403 || m["error"] != "forbidden" || details["reason"] != "tenant_mismatch" {
					t.Errorf("%s (key %v, Content-Type %q): %d %s, want 403 forbidden tenant_mismatch", c.name, keyed, ct, resp.StatusCode, resp.Body)
					continue
				}
				first.check(t, fmt.Sprintf("%s (key %v, Content-Type %q)", c.name, keyed, ct), resp.Body)
			}
		}
	}
	if got := f.runs.Len(); got != before {
		t.Errorf("%d runs created", got-before)
	}
	if r, _ := f.runs.Get(context.Background(), live.ID); r.Status != runs.StatusPending {
		t.Errorf("the live run is %s, want pending", r.Status)
	}
	for _, ct := range []string{"application/json", ""} {
		e := withContentType(ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop","tenantId":"acme"}`), ct)
		if resp, _ := f.do(t, e); resp.StatusCode != 201 {
			t.Errorf("the caller's own tenant, Content-Type %q: %d %s", ct, resp.StatusCode, resp.Body)
		}
	}
}

// TestCreateRunRefusesWhatItsSchemaRefuses: a createRun body the host's
// own closed schema refuses is 400 validation_error naming the member, and
// creates nothing: scopeId "" (minLength 1), inputs null (an object),
// tenantId not a string (null, a number, a boolean, an object, an array).
// A tenantId of the wrong type is a malformed request, not another
// tenant: with the Guard's BodyTenantField set (the deployed stack's) it
// is the same 400, never 403 forbidden, with or without a key and under
// every Content-Type the route takes; nothing is recorded, so the key then
// runs a corrected body.
func TestCreateRunRefusesWhatItsSchemaRefuses(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{BodyTenantField: "tenantId"}, nil)
	before := f.runs.Len()
	n := 0
	for _, c := range []struct{ body, field string }{
		{`{"workflowId":"conformance-noop","scopeId":""}`, "scopeId"},
		{`{"workflowId":"conformance-noop","inputs":null}`, "inputs"},
		{`{"workflowId":"conformance-noop","tenantId":null}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":5}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":0.5}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":true}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":{"id":"acme"}}`, "tenantId"},
		{`{"workflowId":"conformance-noop","tenantId":["acme"]}`, "tenantId"},
	} {
		var first sameAnswer
		for _, keyed := range []bool{true, false} {
			for _, ct := range []string{"application/json", ""} {
				n++
				key := ""
				if keyed {
					key = fmt.Sprintf("k-create-schema-%010d", n)
				}
				e := withContentType(ev("POST", "/runs", "acme", key, c.body), ct)
				resp, m := f.do(t, e)
				details, _ := m["details"].(map[string]any)
				if resp.StatusCode != 400 || m["error"] != "validation_error" || details["field"] != c.field {
					t.Errorf("%s (key %v, Content-Type %q): %d %s, want 400 validation_error on %s", c.body, keyed, ct, resp.StatusCode, resp.Body, c.field)
					continue
				}
				first.check(t, fmt.Sprintf("%s (key %v, Content-Type %q)", c.body, keyed, ct), resp.Body)
				if keyed {
					// Nothing recorded: the key runs the corrected body.
					if r, _ := f.do(t, ev("POST", "/runs", "acme", key, `{"workflowId":"conformance-noop","tenantId":"acme","scopeId":"s","inputs":{}}`)); r.StatusCode != 201 {
						t.Errorf("%s: the key again with a valid body: %d %s", c.body, r.StatusCode, r.Body)
					}
					before++
				}
			}
		}
	}
	if got := f.runs.Len(); got != before {
		t.Errorf("%d runs created by refused bodies", got-before)
	}
}

// TestBodyTenantOfABodylessRouteIsRefusedWhateverTheContentType: the routes
// that read no body (retryRun, resubmitInboxEntry, discardInboxEntry) take
// a body only as strict JSON text, whatever its Content-Type (checkNoBody);
// with the Guard's BodyTenantField set, such a body naming another tenant
// is 403 forbidden (details.reason tenant_mismatch) under every
// Content-Type (JSON, text/plain, none), with or without a key, the same
// answer byte for byte, and nothing runs; the caller's own tenant is
// accepted under every Content-Type.
func TestBodyTenantOfABodylessRouteIsRefusedWhateverTheContentType(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{BodyTenantField: "tenantId"}, nil)
	failed := f.newRun(t, "acme")
	f.move(t, failed.ID, runs.StatusPending, runs.StatusFailed, "boom", t0.Add(time.Second))
	entry := inbox.EntryID(idem.ClaimInfo{}, false)
	paths := map[string]string{
		"retry":    "/runs/" + runs.ProjectID(failed.ID) + "/retry",
		"resubmit": "/inbox/" + entry + "/resubmit",
		"discard":  "/inbox/" + entry + "/discard",
	}
	cts := []string{"application/json", "text/plain", "application/x-www-form-urlencoded", ""}
	before := f.runs.Len()
	n := 0
	for name, path := range paths {
		for _, body := range []string{`{"tenantId":"globex"}`, `{"tenantId":{"id":"acme"}}`, `{"x":1,"tenantId":"ACME"}`} {
			var first sameAnswer
			for _, keyed := range []bool{true, false} {
				for _, ct := range cts {
					n++
					key := ""
					if keyed {
						key = fmt.Sprintf("k-bodyless-tenant-%010d", n)
					}
					e := withContentType(ev("POST", path, "acme", key, body), ct)
					resp, m := f.do(t, e)
					details, _ := m["details"].(map[string]any)
					if resp.StatusCode != 403 || m["error"] != "forbidden" || details["reason"] != "tenant_mismatch" {
						t.Errorf("%s %s (key %v, Content-Type %q): %d %s, want 403 forbidden tenant_mismatch", name, body, keyed, ct, resp.StatusCode, resp.Body)
						continue
					}
					first.check(t, fmt.Sprintf("%s %s (key %v, Content-Type %q)", name, body, keyed, ct), resp.Body)
				}
			}
		}
	}
	if got := f.runs.Len(); got != before {
		t.Errorf("%d runs created", got-before)
	}
	for _, ct := range cts {
		n++
		e := withContentType(ev("POST", paths["retry"], "acme", fmt.Sprintf("k-bodyless-tenant-%010d", n), `{"tenantId":"acme"}`), ct)
		if resp, _ := f.do(t, e); resp.StatusCode != 201 {
			t.Errorf("retry naming the caller's own tenant, Content-Type %q: %d %s", ct, resp.StatusCode, resp.Body)
		}
	}
}

// TestCreateRunEvalModeAndItsMembers: this host does not advertise
// agents.evalSuite, so a createRun with mode "eval" is refused (runs.md: "A
// host that does not advertise agents.evalSuite MUST reject it") with 422
// capability_required naming the capability, and creates nothing; the
// members the host accepts without acting on them are still held to their
// schema's type (mode the one value "eval"; callbackUrl, evalSuiteRef,
// agentId and scopeId strings, evalSuiteRef and agentId non-empty; scopeId
// is acted on only under OpenWOP-Dedup: enforce): another value is 400
// validation_error naming the member.
func TestCreateRunEvalModeAndItsMembers(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		body, code, field string
		status            int
	}{
		{`{"mode":"eval","evalSuiteRef":"suite://s","agentId":"a"}`, "capability_required", "", 422},
		{`{"workflowId":"conformance-noop","mode":"eval","evalSuiteRef":"suite://s","agentId":"a"}`, "capability_required", "", 422},
		{`{"workflowId":"conformance-noop","mode":"eval"}`, "capability_required", "", 422},
		{`{"workflowId":"conformance-noop","mode":"x"}`, "validation_error", "mode", 400},
		{`{"workflowId":"conformance-noop","mode":1}`, "validation_error", "mode", 400},
		{`{"workflowId":"conformance-noop","mode":null}`, "validation_error", "mode", 400},
		{`{"workflowId":"conformance-noop","callbackUrl":1}`, "validation_error", "callbackUrl", 400},
		{`{"workflowId":"conformance-noop","callbackUrl":{"url":"https://example.com/cb"}}`, "validation_error", "callbackUrl", 400},
		{`{"workflowId":"conformance-noop","agentId":5}`, "validation_error", "agentId", 400},
		{`{"workflowId":"conformance-noop","agentId":""}`, "validation_error", "agentId", 400},
		{`{"workflowId":"conformance-noop","evalSuiteRef":""}`, "validation_error", "evalSuiteRef", 400},
		{`{"workflowId":"conformance-noop","evalSuiteRef":["a"]}`, "validation_error", "evalSuiteRef", 400},
		{`{"workflowId":"conformance-noop","scopeId":7}`, "validation_error", "scopeId", 400},
		{`{"workflowId":"conformance-noop","scopeId":null}`, "validation_error", "scopeId", 400},
		{`{"workflowId":"conformance-noop","callbackUrl":"https://example.com/cb","agentId":"a","evalSuiteRef":"suite://s"}`, "", "", 201},
	}
	for i, c := range cases {
		before := f.runs.Len()
		resp, m := f.do(t, ev("POST", "/runs", "acme", fmt.Sprintf("k-eval-mode-%012d", i), c.body))
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d %s", c.body, resp.StatusCode, resp.Body, c.status, c.code)
			continue
		}
		if c.status == 201 {
			continue
		}
		details, _ := m["details"].(map[string]any)
		if m["error"] != c.code || m["message"] == "" {
			t.Errorf("%s: %s, want %s", c.body, resp.Body, c.code)
		}
		if c.field != "" && details["field"] != c.field {
			t.Errorf("%s: details %v, want field %s", c.body, m["details"], c.field)
		}
		if c.code == "capability_required" && details["requiredCapability"] != "agents.evalSuite" {
			t.Errorf("%s: details %v, want requiredCapability agents.evalSuite", c.body, m["details"])
		}
		if f.runs.Len() != before {
			t.Errorf("%s: a run was created", c.body)
		}
	}
}

// TestWebhookDestinationRefusedAtCreate: createRun refuses a webhook
// destination its policy refuses (400 webhook_url_rejected, no run) in
// every spelling of the host: the absolute form with a trailing dot
// ("localhost.", "10.0.0.1."), an IPv4 address in a form other than four
// decimal numbers (resolvers disagree on "127.1", "0x7f000001",
// "2130706433", "0177.0.0.1"; a URL parser reads each as an address), and
// a port outside 1..65535; the trailing-dot form of a public host is
// accepted, as it names the same host.
func TestWebhookDestinationRefusedAtCreate(t *testing.T) {
	f := newFixture(t)
	for i, u := range []string{
		"http://localhost./", "http://LOCALHOST./x", "http://a.localhost./", "http://10.0.0.1./", "http://169.254.169.254./",
		"http://127.1/", "http://0x7f000001/", "http://0X7F.1/", "http://2130706433/", "http://0177.0.0.1/", "http://10.1/",
		"https://example.com:99999/", "https://example.com:0/", "http://example.com./.", "http://./",
	} {
		before := f.runs.Len()
		resp, m := f.do(t, ev("POST", "/runs", "acme", fmt.Sprintf("k-webhook-host-%010d", i),
			`{"workflowId":"webhook","inputs":{"url":"`+u+`"}}`))
		if u == "http://example.com./." {
			if resp.StatusCode != 201 {
				t.Errorf("%s: %d %s, want 201 (a public host)", u, resp.StatusCode, resp.Body)
			}
			continue
		}
		if resp.StatusCode != 400 || m["error"] != "webhook_url_rejected" || f.runs.Len() != before {
			t.Errorf("%s: %d %s, want 400 webhook_url_rejected and no run", u, resp.StatusCode, resp.Body)
		}
	}
}

// TestWebhookNonASCIIHostRefusedAtCreate: createRun refuses a webhook
// destination whose host holds non-ASCII characters (400
// webhook_url_rejected, no run): net/http maps such a host through IDNA
// before dialing it, so fullwidth digits and letters and ideographic full
// stops spell refused destinations ("１２７.０.０.１" is 127.0.0.1).
func TestWebhookNonASCIIHostRefusedAtCreate(t *testing.T) {
	f := newFixture(t)
	for i, u := range []string{"http://１２７.０.０.１/", "http://169。254。169。254/latest/", "http://ｌｏｃａｌｈｏｓｔ:8080/", "http://１０.０.０.１/"} {
		before := f.runs.Len()
		resp, m := f.do(t, ev("POST", "/runs", "acme", fmt.Sprintf("k-webhook-idna-%010d", i),
			`{"workflowId":"webhook","inputs":{"url":"`+u+`"}}`))
		if resp.StatusCode != 400 || m["error"] != "webhook_url_rejected" || f.runs.Len() != before {
			t.Errorf("%s: %d %s, want 400 webhook_url_rejected and no run", u, resp.StatusCode, resp.Body)
		}
	}
}

// TestRequiredKeyIsStillTheFirstRefusal: under a Guard that requires an
// Idempotency-Key, a request without one is refused for that first (400
// idempotency_key_invalid, reason missing), whatever its body, as is one
// with an invalid key: the host's own checks of a JSON body (not strict
// JSON, another tenant) come after them, as Layer 1's do.
func TestRequiredKeyIsStillTheFirstRefusal(t *testing.T) {
	f := hostOf(t, runs.NewMemRuns(), idem.Config{Required: true, BodyTenantField: "tenantId"}, nil)
	for _, b := range []string{
		`{"workflowId":"webhook","workflowId":"conformance-noop"}`,
		"{\"workflowId\":\"conformance-noop\",\"inputs\":{\"s\":\"\xff\"}}",
		`{"workflowId":"conformance-noop","tenantId":"globex"}`,
	} {
		for _, ct := range []string{"application/json", ""} {
			e := withContentType(ev("POST", "/runs", "acme", "", b), ct)
			resp, m := f.do(t, e)
			details, _ := m["details"].(map[string]any)
			if resp.StatusCode != 400 || m["error"] != "idempotency_key_invalid" || details["reason"] != "missing" {
				t.Errorf("%q (Content-Type %q): %d %s, want 400 idempotency_key_invalid (missing)", b, ct, resp.StatusCode, resp.Body)
			}
		}
	}
	// An invalid key is refused first too, whatever the body.
	e := ev("POST", "/runs", "acme", "short", `{"workflowId":"conformance-noop","tenantId":"globex","tenantId":"acme"}`)
	delete(e.Headers, "content-type")
	if resp, m := f.do(t, e); resp.StatusCode != 400 || m["error"] != "idempotency_key_invalid" {
		t.Errorf("an invalid key: %d %s, want 400 idempotency_key_invalid", resp.StatusCode, resp.Body)
	}
	if f.runs.Len() != 0 {
		t.Errorf("%d runs created", f.runs.Len())
	}
}

// TestWorkOrderRefusalCodeFollowsThePolicy: the work-order route's
// deterministic 409 for a work order none of whose projects is processed
// names the ERP contract's code, NO_PROJECT_PROCESSED, under the ERP policy
// only; under the default (OpenWOP) policy, whose error codes are the
// registry's and host codes, it is idemkit.no_project_processed.
func TestWorkOrderRefusalCodeFollowsThePolicy(t *testing.T) {
	f := newFixture(t)
	body := `{"work_order_number":"WO-78","projects":[{"code":"p9","name":"Too many","quantity":20000}]}`
	resp, m := f.do(t, ev("POST", "/api/v1/inbound/work-orders", "acme", "k-work-order-refusal-000001", body))
	if resp.StatusCode != 409 || m["error"] != CodeNoProjectProcessedHost {
		t.Fatalf("under the OpenWOP policy: %d %s; want 409 %s", resp.StatusCode, resp.Body, CodeNoProjectProcessedHost)
	}
}

// TestBodylessRoutesRefuseANonJSONBodyWithOrWithoutAKey: retry, inbox
// resubmit and discard read no body, but a keyed request's body is part of
// what its key binds and must be JSON text; the same body is refused
// without a key too (400 validation_error), so a request is never accepted
// or refused for its key's presence. An empty body, or JSON, is accepted
// either way.
func TestBodylessRoutesRefuseANonJSONBodyWithOrWithoutAKey(t *testing.T) {
	f := newFixture(t)
	failed := sourceRun(t, f, "acme", runs.StatusFailed)
	path := "/runs/" + runs.ProjectID(failed.ID) + "/retry"
	for i, body := range []string{`not json`, `  `, `{"a":1e400}`, `{"a":1,"a":2}`, `"\ud800"`} {
		for j, key := range []string{fmt.Sprintf("k-bodyless-garbage-%010d", 2*i), ""} {
			r, m := f.do(t, ev("POST", path, "acme", key, body))
			if r.StatusCode != 400 || m["error"] != "validation_error" {
				t.Fatalf("%s (request %d, key %q): %d %s, want 400 validation_error", body, j, key, r.StatusCode, r.Body)
			}
		}
	}
	for i, key := range []string{"k-bodyless-empty-0000000001", ""} {
		if r, _ := f.do(t, ev("POST", path, "acme", key, ``)); r.StatusCode != 201 {
			t.Fatalf("an empty body %d (key %q): %d %s, want 201", i, key, r.StatusCode, r.Body)
		}
	}
}

// TestIntegerQueryParametersReadAlike: the integer query parameters of the
// event routes (poll's afterSequence and timeout, the stream's bufferMs)
// are read by one rule, the OpenAPI's integer written in decimal digits:
// no sign (a `+` sent as %2B included), no white space, no fraction or
// exponent, not empty, not repeated; leading zeros name the same number.
// Whatever the parameter, a value that breaks the rule is 400
// validation_error naming it in details.field, and one that keeps it is
// read as its number (refused only when out of the parameter's range).
func TestIntegerQueryParametersReadAlike(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	base := "/runs/" + runs.ProjectID(r.ID)
	params := []struct {
		name, path, other string
		good              []string // each in the parameter's range
	}{
		{"afterSequence", base + "/events/poll", "&timeout=1", []string{"5", "05", "0005", "00000000000000000000000000005"}},
		{"timeout", base + "/events/poll", "&afterSequence=0", []string{"5", "05", "0005", "00060"}},
		{"bufferMs", base + "/events", "", []string{"5", "05", "0005", "00100", "0005000"}},
	}
	bad := []string{"%2B5", "%2B0", "-5", "%205", "5%20", "%095", "5.0", "1e1", "0x5", "", "%EF%BC%95", "5%00", "5&NAME=5"}
	for _, p := range params {
		for _, v := range bad {
			q := p.name + "=" + strings.ReplaceAll(v, "NAME", p.name) + p.other
			resp, m := f.do(t, eventsReq(p.path, "acme", q, ""))
			d, _ := m["details"].(map[string]any)
			if resp.StatusCode != 400 || m["error"] != "validation_error" || d["field"] != p.name || m["message"] == "" {
				t.Errorf("?%s: %d %s, want 400 validation_error, details.field %s", q, resp.StatusCode, resp.Body, p.name)
			}
		}
		for _, v := range p.good {
			q := p.name + "=" + v + p.other
			if resp, _ := f.do(t, eventsReq(p.path, "acme", q, "")); resp.StatusCode != 200 {
				t.Errorf("?%s: %d %s, want 200", q, resp.StatusCode, resp.Body)
			}
		}
	}
}
