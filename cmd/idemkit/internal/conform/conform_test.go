package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/cmd/idemkit/internal/conform/conformtest"
)

type breaks = conformtest.Breaks

func newRefServer(p Profile, b breaks) *conformtest.Server { return conformtest.New(string(p), b) }

func digest(b []byte) string { return conformtest.Digest(b) }

// scopeKeys are the reference server's credentials that differ from
// APIKey1 in one scope part, by profile.
func scopeKeys(p Profile) map[string]string {
	switch p {
	case ProfileCommerce:
		return map[string]string{ScopeNamespace: conformtest.APIKeyNamespace2, ScopeWorker: conformtest.APIKeyWorker2}
	case ProfileERP:
		return map[string]string{ScopeClient: conformtest.APIKeyClient2, ScopeCompany: conformtest.APIKeyCompany2,
			ScopeOrganization: conformtest.APIKeyOrganization2}
	}
	return nil
}

func run(t *testing.T, p Profile, b breaks, keys ...string) []Result {
	t.Helper()
	srv := conformtest.HTTPTest(newRefServer(p, b))
	t.Cleanup(srv.Close)
	if keys == nil {
		keys = []string{conformtest.APIKey1, conformtest.APIKey2}
	}
	res, err := Run(context.Background(), Config{
		BaseURL: srv.URL, APIKeys: keys, Profile: p, ScopeKeys: scopeKeys(p),
		// The conformance-delay fixture of the reference server, slow enough to
		// overlap its duplicates on a loaded machine.
		SlowBody:      `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`,
		Stagger:       150 * time.Millisecond,
		Timeout:       20 * time.Second,
		FailedRunBody: `{"workflowId":"` + conformtest.FailsLaterWorkflow + `","inputs":{}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func failed(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if r.Status == Fail {
			out = append(out, r.Scenario)
		}
	}
	return out
}

func dump(rs []Result) string {
	var b bytes.Buffer
	Write(&b, rs)
	return b.String()
}

var allProfiles = []Profile{ProfileOpenWOP, ProfileCommerce, ProfileERP}

func TestCorrectServerPassesEverything(t *testing.T) {
	for _, p := range allProfiles {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			rs := run(t, p, breaks{})
			if len(rs) != len(ScenariosFor(p)) {
				t.Fatalf("%d results", len(rs))
			}
			for _, r := range rs {
				if r.Status != Pass {
					t.Fatalf("correct server:\n%s", dump(rs))
				}
			}
			t.Logf("\n%s", dump(rs))
		})
	}
}

// Every scenario of a profile is one rule, named once.
func TestScenarioNamesAreUnique(t *testing.T) {
	for _, p := range allProfiles {
		seen := map[string]bool{}
		for _, s := range ScenariosFor(p) {
			if seen[s.Name] || s.Summary == "" {
				t.Errorf("%s: scenario %q repeated or without summary", p, s.Name)
			}
			seen[s.Name] = true
		}
	}
	if ScenariosFor(ProfileERP) == nil || ScenariosFor("other") != nil {
		t.Fatal("ScenariosFor")
	}
}

const o, c, e = ProfileOpenWOP, ProfileCommerce, ProfileERP

type want = map[Profile][]string

func one(name string, ps ...Profile) want {
	w := want{}
	for _, p := range ps {
		w[p] = []string{name}
	}
	return w
}

// breakCases: each break of the reference server and, by profile it
// applies to, the scenarios it must fail (and no other).
var breakCases = []struct {
	name string
	b    breaks
	want want
}{
	{"no replay marker", breaks{NoReplayMarker: true}, want{o: {"replay-marker"}, c: {"replay-marker", "sync-pending-action", "pending-action", "settled-replay", "failure-replayed"}, e: {"replay-marker", "live-route", "xml-replay", "xml-error-answer"}}},
	{"a replay's body byte for byte as text/plain", breaks{ReplayTextPlain: true}, one("replay-marker", o, c, e)},
	{"mismatch leaks the cached body", breaks{MismatchLeaks: true}, want{o: {"mismatch"}, c: {"input-mismatch", "operation-mismatch"}, e: {"payload-conflict"}}},
	{"mismatch replays", breaks{MismatchReplays: true}, want{o: {"mismatch"}, c: {"input-mismatch"}, e: {"payload-conflict", "work-order-strict"}}},
	{"an async duplicate runs the request again once, answered after the first finished", breaks{AsyncRunsTwiceOnce: true}, one("in-flight-async", c)},
	{"in-flight runs twice", breaks{InFlightRunsTwice: true}, want{o: {"in-flight"}, c: {"in-flight", "sync-pending-action", "in-flight-async", "pending-action"}, e: {"in-flight"}}},
	{"in-flight without Retry-After", breaks{InFlightNoRetryAfter: true}, want{o: {"in-flight"}, c: {"in-flight", "sync-pending-action"}, e: {"in-flight"}}},
	{"in-flight Retry-After is the lease under a live owner", breaks{InFlightLeaseRetry: true}, want{o: {"in-flight"}, c: {"in-flight", "sync-pending-action"}, e: {"in-flight"}}},
	{"in-flight retry timing in details", breaks{InFlightRetryDetails: true}, one("in-flight", o)},
	{"GET honours the key", breaks{GetHonoursKey: true}, one("get-ignores-key", o, c, e)},
	{"tenants share records", breaks{SharedTenants: true}, one("tenant-isolation", o)},
	{"validation errors cached", breaks{CacheValidation: true}, want{o: {"validation-not-cached"}, c: {"rejected-at-door"}, e: {"validation-not-cached"}}},
	{"bad keys accepted", breaks{AcceptBadKeys: true}, one("key-grammar", o, c, e)},
	{"key not echoed", breaks{NoKeyEcho: true}, want{e: {"response-headers", "xml-error-answer"}}},
	{"valid keys rejected", breaks{RejectValidKeys: true}, one("key-grammar", o, c, e)},
	{"duplicate key headers accepted", breaks{AcceptDuplicateKeys: true}, one("duplicate-keys", e)},
	{"replay re-runs the request", breaks{ReplayReruns: true}, want{o: {"replay-marker", "mismatch", "in-flight", "tenant-isolation"}}},
	{"first execution marked as a replay", breaks{MarkFirstAsReplay: true}, want{o: {"replay-marker", "in-flight", "tenant-isolation", "validation-not-cached"}}},
	{"replay keeps the first X-Request-ID", breaks{StaleRequestID: true}, want{e: {"response-headers", "xml-error-answer"}}},
	{"mismatch with another code", breaks{MismatchWrongCode: true}, want{o: {"mismatch"}, c: {"input-mismatch", "operation-mismatch"}, e: {"payload-conflict"}}},
	{"in-flight with another code", breaks{InFlightWrongCode: true}, one("in-flight", o, e)},
	{"GET validates the key", breaks{GetValidatesKey: true}, one("get-ignores-key", o, c, e)},
	{"validation errors not re-checked", breaks{AcceptInvalidBody: true}, want{o: {"validation-not-cached"}, c: {"rejected-at-door"}, e: {"validation-not-cached"}}},
	{"waiting in flight (correct, not under the ERP policy)", breaks{WaitInFlight: true}, want{o: nil, c: nil, e: {"in-flight"}}},
	{"waiting in flight, answered before the first (correct, not under the ERP policy)", breaks{WaitInFlight: true, SlowFirstAnswer: true}, want{o: nil, c: nil, e: {"in-flight"}}},
	{"duplicates reaching the host after the first finished (correct)", breaks{LateDuplicates: 1}, want{o: nil, c: nil, e: nil}},
	{"an async duplicate reaching the host after the first finished (correct)", breaks{LateDuplicates: 3}, want{c: nil}},
	{"a sync duplicate reaching the host before the first request (correct)", breaks{LateFirst: 6}, want{c: nil}},
	{"an async duplicate reaching the host before the first request (correct)", breaks{LateFirst: 9}, want{c: nil}},
	{"waiting in flight, the first duplicates late (correct, not under the ERP policy)", breaks{WaitInFlight: true, LateDuplicates: 1}, want{o: nil, c: nil, e: {"in-flight"}}},
	{"waiting in flight without replay marker", breaks{WaitInFlight: true, NoReplayMarker: true},
		want{o: {"replay-marker", "in-flight"}, c: {"replay-marker", "in-flight", "pending-action", "settled-replay", "failure-replayed"}}},

	// The commerce policy.
	{"a comma splits the key", breaks{SplitComma: true}, one("key-comma", c)},
	{"non-ASCII keys rejected", breaks{RejectNonASCII: true}, one("key-grammar", c)},
	{"the operation is scope, not bound", breaks{OperationNotBound: true}, one("operation-mismatch", c)},
	{"scope without the namespace", breaks{ScopeWithoutNamespace: true}, one("scope-namespace", c)},
	{"scope without the worker", breaks{ScopeWithoutWorker: true}, one("scope-worker", c)},
	{"failures forgotten", breaks{ForgetFailures: true}, one("failure-replayed", c)},
	{"a 401 recorded", breaks{RecordUnauthenticated: true}, one("rejected-at-door", c)},
	{"the wait mode ignored", breaks{AsyncIgnored: true}, want{c: {"in-flight", "sync-pending-action", "in-flight-async", "pending-action"}}},
	{"a sync duplicate past its wait gets 409, not the pending Action", breaks{SyncInFlightConflict: true}, want{c: {"in-flight", "sync-pending-action"}}},
	{"the mismatch 409 after running the operation", breaks{MismatchRuns: true}, one("operation-mismatch", c)},
	{"async duplicates wait too", breaks{AsyncIgnored: true, WaitInFlight: true}, one("in-flight-async", c)},
	{"async duplicates wait too, answered before the first", breaks{AsyncIgnored: true, WaitInFlight: true, SlowFirstAnswer: true}, one("in-flight-async", c)},
	{"async duplicates wait too, the first late", breaks{AsyncIgnored: true, WaitInFlight: true, LateDuplicates: 3}, one("in-flight-async", c)},
	{"a replay is the answer recorded at creation", breaks{ReplayStoredBody: true}, one("settled-replay", c)},
	{"a replay names the Action with one byte of its status changed", breaks{ReplayStatusOneByte: true}, want{c: {"key-comma", "replay-marker", "input-mismatch", "operation-mismatch", "in-flight", "in-flight-async", "settled-replay", "scope-namespace", "scope-worker"}}},
	{"an async duplicate names the run before it exists (GET answers 404)", breaks{AsyncNamesUnwrittenRun: true}, one("pending-action", c)},
	{"an async duplicate names another run by its statusUrl alone", breaks{AsyncNamesOtherRunByURL: true}, one("pending-action", c)},
	{"a sync duplicate names the run before it exists (GET answers 404)", breaks{SyncNamesUnwrittenRun: true}, one("sync-pending-action", c)},
	{"a sync duplicate names the run before it exists, the first duplicate late", breaks{SyncNamesUnwrittenRun: true, LateDuplicates: 2}, one("sync-pending-action", c)},
	{"an async duplicate names the run before it exists, the first duplicate late", breaks{AsyncNamesUnwrittenRun: true, LateDuplicates: 4}, one("pending-action", c)},
	{"an async duplicate names the run before it exists by a statusUrl answering 200 with no run", breaks{AsyncStatusURLNoRun: true}, one("pending-action", c)},
	{"an async duplicate's statusUrl is on another origin", breaks{RunBeforeDelay: true, AsyncStatusURLElsewhere: true}, one("pending-action", c)},
	{"an async duplicate's pending answer without Retry-After", breaks{AsyncNoRetryAfter: true}, one("pending-action", c)},
	{"the run written before the delay (correct)", breaks{RunBeforeDelay: true}, want{c: nil}},
	{"a retry not linked by on", breaks{RetryUnlinked: true}, one("retry-on-link", c)},
	{"If-Match of the current version refused too", breaks{IfMatchRefusesCurrent: true}, one("if-match-stale", c)},
	{"the inbox is the namespace's", breaks{InboxTenantWide: true}, one("inbox-private", c)},

	// The ERP policy.
	{"whitespace around the key ignored", breaks{AcceptKeyWhitespace: true}, one("key-whitespace", e)},
	{"the scope lacks the route", breaks{RouteNotScoped: true}, one("scope-route", e)},
	{"scope without the client", breaks{ScopeWithoutClient: true}, one("scope-client", e)},
	{"scope without the company", breaks{ScopeWithoutCompany: true}, one("scope-company", e)},
	{"scope without the organisation", breaks{ScopeWithoutOrganization: true}, one("scope-organization", e)},
	{"5xx stored and replayed", breaks{StoreFailures: true}, one("failed-retryable", e)},
	{"conflict message not the policy's", breaks{ConflictMessageWrong: true}, one("payload-conflict", e)},
	{"envelopes without request_id", breaks{NoEnvelopeRequestID: true}, one("error-envelope", e)},
	{"in-flight Retry-After: 1", breaks{InFlightRetryAfterOne: true}, one("in-flight", e)},
	{"the test route needs a credential", breaks{TestRouteNeedsAuth: true}, one("test-route", e)},
	{"the test route acquires and replays", breaks{TestRouteIdempotent: true}, one("test-route", e)},
	{"gateway answers without a request id", breaks{GatewayNoRequestID: true}, one("request-id-everywhere", e)},
	{"the work-order hash is the raw body", breaks{WorkOrderRawDigest: true}, one("live-route", e)},
	{"a work-order replay ignores the Accept", breaks{WorkOrderIgnoresAccept: true}, want{e: {"xml-replay", "xml-error-answer"}}},
	{"the work-order contract read leniently", breaks{WorkOrderLenient: true}, one("work-order-strict", e)},
	{"an XML error answer replaced by an envelope", breaks{XMLErrorEnveloped: true}, one("xml-error-answer", e)},
}

// Each break must fail exactly the matching scenario(s) of each profile it
// applies to, and pass the rest.
func TestBrokenServerFailsTheMatchingScenario(t *testing.T) {
	cases := breakCases
	for _, tc := range cases {
		for _, p := range allProfiles {
			want, ok := tc.want[p]
			if !ok {
				continue
			}
			t.Run(tc.name+"/"+string(p), func(t *testing.T) {
				t.Parallel()
				rs := run(t, p, tc.b)
				if got := failed(rs); !slices.Equal(got, want) {
					t.Fatalf("failed %v, want %v:\n%s", got, want, dump(rs))
				}
				for _, r := range rs {
					if r.Status == Fail {
						t.Logf("%s %s: %s", r.Status, r.Scenario, r.Detail)
					}
				}
				for _, r := range rs {
					if r.Status == Skip {
						t.Fatalf("skipped %s:\n%s", r.Scenario, dump(rs))
					}
				}
			})
		}
	}
}

// Every scenario of every profile is failed by some break: a rule no break
// switches off would be an untested check.
func TestEveryScenarioHasABreak(t *testing.T) {
	for _, p := range allProfiles {
		covered := map[string]bool{}
		for _, tc := range breakCases {
			for _, n := range tc.want[p] {
				covered[n] = true
			}
		}
		for _, s := range ScenariosFor(p) {
			if !covered[s.Name] {
				t.Errorf("%s: no break fails scenario %s", p, s.Name)
			}
			delete(covered, s.Name)
		}
		for n := range covered {
			t.Errorf("%s: a break case names %s, not a scenario of the profile", p, n)
		}
	}
}

// A server of one profile checked against the other fails on the rules
// where they differ (grammar, marker), which shows the profile matters.
func TestProfileMismatchFails(t *testing.T) {
	t.Parallel()
	srv := conformtest.HTTPTest(newRefServer(ProfileOpenWOP, breaks{}))
	defer srv.Close()
	rs, err := Run(context.Background(), Config{BaseURL: srv.URL, APIKeys: []string{conformtest.APIKey1}, Profile: ProfileERP,
		SlowBody: `{"workflowId":"conformance-delay","inputs":{"delayMs":1000}}`, Stagger: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	got := failed(rs)
	if !slices.Contains(got, "key-grammar") || !slices.Contains(got, "replay-marker") {
		t.Fatalf("failed %v:\n%s", got, dump(rs))
	}
}

func TestOneAPIKeySkipsTenantIsolation(t *testing.T) {
	t.Parallel()
	rs := run(t, ProfileOpenWOP, breaks{SharedTenants: true}, conformtest.APIKey1)
	var b bytes.Buffer
	passed, nfailed := Write(&b, rs)
	out := b.String()
	if passed != len(Scenarios())-1 || nfailed != 0 {
		t.Fatalf("passed %d failed %d:\n%s", passed, nfailed, out)
	}
	if !strings.Contains(out, "SKIP tenant-isolation: needs two --api-key flags") {
		t.Fatalf("output:\n%s", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(Scenarios())+1 || lines[len(lines)-1] != "6 passed, 0 failed" {
		t.Fatalf("output:\n%s", out)
	}
	for i, s := range Scenarios() {
		if !strings.Contains(lines[i], " "+s.Name+": ") {
			t.Fatalf("line %d %q, want scenario %s", i, lines[i], s.Name)
		}
	}
}

// TestUnreachableServerRunsNothing: an API that does not answer HTTP at
// all is one error, ErrUnreachable naming the address, and no scenario
// runs (each would fail on the same dial error).
func TestUnreachableServerRunsNothing(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(nil)
	url := srv.URL
	srv.Close()
	rs, err := Run(context.Background(), Config{BaseURL: url, APIKeys: []string{"a", "b"}, Timeout: 5 * time.Second, Stagger: time.Millisecond})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), url) || len(rs) != 0 {
		t.Fatalf("%v, %d results; want ErrUnreachable naming %s and none", err, len(rs), url)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{
		{},
		{BaseURL: "ftp://x"},
		{BaseURL: "http://x", Route: "GET /runs"},
		{BaseURL: "http://x", Route: "POST"},
		{BaseURL: "http://x", Body: "[1]"},
		{BaseURL: "http://x", Body: "{"},
		{BaseURL: "http://x", Profile: "other"},
		{BaseURL: "http://x", GetPath: "/runs/x"},
		{BaseURL: "http://x", APIKeys: []string{"a", "b", "c"}},
	} {
		if _, err := Run(context.Background(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err %v", c, err)
		}
	}
}

func TestVariantChangesTheBody(t *testing.T) {
	for _, b := range []string{DefaultBody, `{"a":1}`} {
		v := variant(b)
		if v == b || digest([]byte(v)) == digest([]byte(b)) {
			t.Fatalf("variant(%s) = %s", b, v)
		}
	}
	if !strings.Contains(variant(DefaultBody), `"inputs":{"conformVariant":`) {
		t.Fatal(variant(DefaultBody))
	}
}

// Write prints exactly one line per scenario, whatever a detail holds, and
// the closing count line.
func TestWriteOneLinePerScenario(t *testing.T) {
	var b bytes.Buffer
	p, f := Write(&b, []Result{
		{Scenario: "key-grammar", Status: Pass, Detail: "ok"},
		{Scenario: "mismatch", Status: Fail, Detail: "request failed: dial tcp:\nconnection refused\r\n"},
		{Scenario: "tenant-isolation", Status: Skip, Detail: "needs two --api-key flags (two tenants)"},
	})
	want := "PASS key-grammar: ok\nFAIL mismatch: request failed: dial tcp: connection refused\nSKIP tenant-isolation: needs two --api-key flags (two tenants)\n1 passed, 1 failed\n"
	if p != 1 || f != 1 || b.String() != want {
		t.Fatalf("passed %d failed %d:\n%q\nwant\n%q", p, f, b.String(), want)
	}
}

// The checker judges the API's own answers: it does not follow a redirect.
func TestDefaultClientDoesNotFollowRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/runs" {
			http.Redirect(w, r, "/elsewhere", http.StatusSeeOther)
			return
		}
		w.WriteHeader(201)
	}))
	defer srv.Close()
	rc, err := Config{BaseURL: srv.URL}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cfg: rc, rules: rulesFor(rc.Profile)}
	a, err := e.post(context.Background(), "", DefaultBody, 0)
	if err != nil || a.status != http.StatusSeeOther {
		t.Fatalf("answer %v, err %v: want the 303 itself", a, err)
	}
}

// TestRequestIDEverywhereSaysWhichUnauthorizedItMeasured: the ERP
// profile's request-id-everywhere says which 401 it measured: the host's
// own (checked for X-Request-ID and request_id like the 404, 405 and 415),
// or API Gateway's own answer from its Lambda authorizer, as the deployed
// stack gives it (no host request id can be on it; reported, not failed).
// A host 401 without the request id still fails (GatewayNoRequestID).
func TestRequestIDEverywhereSaysWhichUnauthorizedItMeasured(t *testing.T) {
	for _, tc := range []struct {
		name   string
		b      breaks
		status Status
		says   string
	}{
		{"the host's 401", breaks{}, Pass, "measured the host's own 401"},
		{"API Gateway's 401", breaks{APIGatewayAuthorizer: true}, Pass, "measured API Gateway's own 401"},
		{"a host 401 without a request id", breaks{GatewayNoRequestID: true}, Fail, "no X-Request-ID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, r := range run(t, ProfileERP, tc.b) {
				if r.Scenario == "request-id-everywhere" && (r.Status != tc.status || !strings.Contains(r.Detail, tc.says)) {
					t.Fatalf("request-id-everywhere: %s %s, want %s saying %q", r.Status, r.Detail, tc.status, tc.says)
				}
			}
		})
	}
}

// TestPendingActionSaysWhatItChecked: the commerce profile's
// pending-action says what the async duplicate of a request still running
// was answered: the pending answer naming no run yet (the reference server
// writes its run after its delay, as a host whose run commits with the
// create's answer), or the pending Action naming a run, which a GET found
// while the first request still ran (RunBeforeDelay). A duplicate naming a
// run before it is written fails, naming that run.
func TestPendingActionSaysWhatItChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		b      breaks
		status Status
		says   string
	}{
		{"the run not written yet", breaks{}, Pass, "names no run yet"},
		{"the run not written yet, the first duplicate late", breaks{LateDuplicates: 4}, Pass, "names no run yet"},
		{"the run written first", breaks{RunBeforeDelay: true}, Pass, "which GET reads"},
		{"a run named before it is written", breaks{AsyncNamesUnwrittenRun: true}, Fail, "which does not exist"},
		{"another run named by its statusUrl", breaks{AsyncNamesOtherRunByURL: true}, Fail, "and the first request's Action is"},
		{"a statusUrl reading no run", breaks{AsyncStatusURLNoRun: true}, Fail, "naming no run"},
		{"a statusUrl on another origin", breaks{RunBeforeDelay: true, AsyncStatusURLElsewhere: true}, Fail, "not on the API's origin"},
		{"no Retry-After", breaks{AsyncNoRetryAfter: true}, Fail, "Retry-After"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seen := false
			for _, r := range run(t, ProfileCommerce, tc.b) {
				if r.Scenario == "pending-action" {
					seen = true
					if r.Status != tc.status || !strings.Contains(r.Detail, tc.says) {
						t.Fatalf("pending-action: %s %s, want %s saying %q", r.Status, r.Detail, tc.status, tc.says)
					}
				}
			}
			if !seen {
				t.Fatal("no pending-action result")
			}
		})
	}
}

// TestLateDuplicatesAreTriedAgain: a duplicate sent while the first
// request runs may reach the host only after it finished (a loaded
// machine; the reference server's LateDuplicates mode makes it so for one
// slow request: the ERP policy's in-flight scenario's first, the commerce
// policy's in-flight-async's first). A verdict that only says so is not
// given: the scenario tries again with a new key and says so.
func TestLateDuplicatesAreTriedAgain(t *testing.T) {
	for _, tc := range []struct {
		p        Profile
		late     int
		scenario string
	}{
		{ProfileERP, 1, "in-flight"},
		{ProfileCommerce, 3, "in-flight-async"},
	} {
		t.Run(string(tc.p), func(t *testing.T) {
			t.Parallel()
			seen := false
			for _, r := range run(t, tc.p, breaks{LateDuplicates: tc.late}) {
				if r.Scenario == tc.scenario {
					seen = true
					if r.Status != Pass || !strings.Contains(r.Detail, ": on the earlier ones a duplicate came late)") {
						t.Fatalf("%s: %s %s, want a pass on a later try", r.Scenario, r.Status, r.Detail)
					}
				}
			}
			if !seen {
				t.Fatalf("no %s result", tc.scenario)
			}
		})
	}
}

// TestInterruptedRunFailsNoScenario: a run cut short by its caller (Ctrl-C)
// is ErrInterrupted saying how many scenarios did not run; the scenario it
// cut and those after it are not reported as failures of the API, which
// never got to answer them.
func TestInterruptedRunFailsNoScenario(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/.well-known/openwop") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{}`))
			return
		}
		cancel() // the user presses Ctrl-C while the first scenario waits
		select { // a scenario's raw request may leave its connection open
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	rs, err := Run(ctx, Config{BaseURL: srv.URL, APIKeys: []string{"a", "b"}, Timeout: 5 * time.Second, Stagger: time.Millisecond})
	n := len(ScenariosFor(ProfileOpenWOP))
	if !errors.Is(err, ErrInterrupted) || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d scenarios not run", n, n)) {
		t.Fatalf("err %v; want ErrInterrupted saying %d of %d scenarios not run", err, n, n)
	}
	if f := failed(rs); len(f) != 0 {
		t.Fatalf("scenarios failed by the interrupt: %v\n%s", f, dump(rs))
	}
}

// TestInterruptedBeforeTheFirstAnswerRunsNothing: Ctrl-C while the first
// request (the capabilities GET) waits for an API that has not answered
// yet is the user's interrupt, ErrInterrupted saying no scenario ran, not
// ErrUnreachable "context canceled" (RED_TEAM 244).
func TestInterruptedBeforeTheFirstAnswerRunsNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel() // the user presses Ctrl-C while the capabilities GET waits
		<-r.Context().Done()
	}))
	defer srv.Close()
	rs, err := Run(ctx, Config{BaseURL: srv.URL, APIKeys: []string{"a", "b"}, Timeout: 5 * time.Second, Stagger: time.Millisecond})
	n := len(ScenariosFor(ProfileOpenWOP))
	if !errors.Is(err, ErrInterrupted) || errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d scenarios not run", n, n)) || len(rs) != 0 {
		t.Fatalf("%v, %d results; want ErrInterrupted saying %d of %d scenarios not run, and none", err, len(rs), n, n)
	}
}

// TestSilentServerIsUnreachableNamingTheTimeout: an API that accepts the
// connection and never answers is ErrUnreachable naming the bound it did
// not answer within, --timeout, in place of Go's "context deadline
// exceeded" (RED_TEAM 244).
func TestSilentServerIsUnreachableNamingTheTimeout(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	rs, err := Run(context.Background(), Config{BaseURL: srv.URL, APIKeys: []string{"a", "b"}, Timeout: 200 * time.Millisecond, Stagger: time.Millisecond})
	if !errors.Is(err, ErrUnreachable) || len(rs) != 0 {
		t.Fatalf("%v, %d results; want ErrUnreachable and none", err, len(rs))
	}
	if msg := err.Error(); strings.Contains(msg, "deadline exceeded") || !strings.Contains(msg, "no answer") || !strings.Contains(msg, "within 200ms (--timeout)") {
		t.Fatalf("%q: want it to say there was no answer within 200ms (--timeout)", msg)
	}
}
