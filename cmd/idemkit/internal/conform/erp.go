package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/client"
)

// erpScenarios are the ERP policy's checks, in order.
func erpScenarios() []Scenario {
	return []Scenario{
		{"key-grammar", "keys of 8..128 of A-Z a-z 0-9 . _ : - are accepted, others get 400", keyGrammar},
		{"key-whitespace", "a key with leading or trailing whitespace gets 400", keyWhitespace},
		{"duplicate-keys", "several Idempotency-Key headers get 400", duplicateKeys},
		{"replay-marker", "a same-key repeat is the cached answer, byte-exact, with Idempotency-Replayed: true (false on a first answer)", replayMarker},
		{"response-headers", "X-Request-ID is the current attempt's, the key is echoed, Idempotency-Original-Request-ID names the first processed request", responseHeaders},
		{"payload-conflict", "another payload under the same key gets 409 IDEMPOTENCY_KEY_CONFLICT with the policy's message", mismatch},
		{"error-envelope", "an error envelope's error is the ERP code and its request_id the current attempt id (X-Request-ID)", errorEnvelope},
		{"in-flight", "a duplicate of a request in progress gets 409 IDEMPOTENCY_REQUEST_IN_PROGRESS with Retry-After: 2 at once", inWindow(inFlight)},
		{"scope-route", "the same key on another route names another record", scopeRoute},
		{"scope-client", "the same key under another client names another record", scopeBy(ScopeClient)},
		{"scope-company", "the same key under another company names another record", scopeBy(ScopeCompany)},
		{"scope-organization", "the same key under another organisation names another record", scopeBy(ScopeOrganization)},
		{"failed-retryable", "a 5xx is failed_retryable: a same-key retry runs again, never a replay", failedRetryable},
		{"test-route", "the test route is public, needs no key and never acquires or replays", testRoute},
		{"get-ignores-key", "GET does not honour Idempotency-Key", getIgnoresKey},
		{"validation-not-cached", "a 400 validation error is not cached", validationNotCached},
		{"live-route", "the live work-order route is served: a JSON work order and the same work order in XML under one key replay", liveRoute},
		{"xml-replay", "a JSON original replayed with Accept: application/xml answers in XML", xmlReplay},
		{"work-order-strict", "a work order body the contract does not define gets 400 in JSON and XML alike, never another's replay; codes are upper-cased by ASCII rules only", workOrderStrict},
		{"xml-error-answer", "the route's business refusal asked for in XML keeps X-Request-ID, the key echo, Idempotency-Replayed and the original request id, first and on replay", xmlErrorAnswer},
		{"request-id-everywhere", "every answer carries X-Request-ID and every error envelope the same request_id: 401, 404, 405, 415 too", requestIDEverywhere},
	}
}

// keyWhitespace: a valid key written with whitespace around it (by hand:
// Go's client trims it) is rejected with 400; the same key without the
// whitespace is accepted.
func keyWhitespace(ctx context.Context, e *env) Result {
	var problems []string
	for _, c := range []struct{ label, line string }{
		{"leading", " \t%s"}, {"trailing", " %s \t"}, {"leading and trailing", " \t %s \t"},
	} {
		k := "ERP-WO-" + randomKey(16, "")
		a, err := e.rawPost(ctx, fmt.Sprintf(c.line, k), e.cfg.Body)
		if err != nil {
			return failErr(err)
		}
		if a.status != http.StatusBadRequest {
			problems = append(problems, fmt.Sprintf("a key with %s whitespace got %s, want 400", c.label, a))
		}
	}
	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}
	a, err := e.rawPost(ctx, " ERP-WO-"+randomKey(16, ""), e.cfg.Body)
	if err != nil {
		return failErr(err)
	}
	if !a.is2xx() {
		return fail("a valid key written by hand got %s, want 2xx", a)
	}
	return pass("leading and trailing whitespace rejected with 400")
}

// duplicateKeys: two Idempotency-Key header lines, equal or not, get 400.
func duplicateKeys(ctx context.Context, e *env) Result {
	k := client.NewKey()
	for _, vals := range [][]string{{client.NewKey(), client.NewKey()}, {k, k}} {
		a, err := e.do(ctx, call{method: e.cfg.method, path: e.cfg.path, keys: vals, body: e.cfg.Body})
		if err != nil {
			return failErr(err)
		}
		if a.status != http.StatusBadRequest {
			same := map[bool]string{true: "equal", false: "different"}[vals[0] == vals[1]]
			return fail("two Idempotency-Key headers (%s values) got %s, want 400", same, a)
		}
	}
	return pass("two Idempotency-Key headers rejected with 400")
}

// responseHeaders: the ERP policy's headers on a first answer and its
// replay.
func responseHeaders(ctx context.Context, e *env) Result {
	k := client.NewKey()
	a1, r, ok := e.postOK(ctx, k, e.cfg.Body, "first request")
	if !ok {
		return r
	}
	a2, err := e.post(ctx, k, e.cfg.Body, 0)
	if err != nil {
		return failErr(err)
	}
	if msg := requestIDs(k, a1, a2); msg != "" {
		return fail("%s", msg)
	}
	return pass("key echo, X-Request-ID and Idempotency-Original-Request-ID correct on a first answer and its replay")
}

// erpEnvelope checks an ERP error envelope: error is one of codes (any
// non-empty code when codes is empty), message is non-empty (msg exactly
// when set), request_id is the answer's X-Request-ID.
func erpEnvelope(a *answer, codes []string, msg string) string {
	var env struct {
		Error     string `json:"error"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(a.body, &env); err != nil {
		return fmt.Sprintf("the %d body is not an error envelope: %v", a.status, err)
	}
	rid := a.header.Get("X-Request-ID")
	switch {
	case env.Error == "" || !oneOf(env.Error, codes):
		return fmt.Sprintf("the %d envelope's error is %q, want %s", a.status, env.Error, strings.Join(codes, "|"))
	case msg != "" && env.Message != msg:
		return fmt.Sprintf("the %d envelope's message is %q, want %q", a.status, env.Message, msg)
	case env.Message == "":
		return fmt.Sprintf("the %d envelope has no message", a.status)
	case rid == "":
		return fmt.Sprintf("the %d answer has no X-Request-ID", a.status)
	case env.RequestID != rid:
		return fmt.Sprintf("the %d envelope's request_id is %q, want the X-Request-ID %q", a.status, env.RequestID, rid)
	}
	return ""
}

// errorEnvelope: every error answer of the ERP policy's own making (an
// invalid body, a malformed key, two key headers, a payload conflict) is an
// envelope whose request_id is the current attempt id, X-Request-ID. An
// answer that is not an error (another rule broken) is left to that rule's
// scenario; at least one must be an error.
func errorEnvelope(ctx context.Context, e *env) Result {
	k := client.NewKey()
	if _, r, ok := e.postOK(ctx, k, e.cfg.Body, "first request"); !ok {
		return r
	}
	cases := []struct {
		label string
		c     call
	}{
		{"an invalid body", call{keys: []string{client.NewKey()}, body: e.cfg.InvalidBody}},
		{"a 7-character key", call{keys: []string{randomKey(7, "")}, body: e.cfg.Body}},
		{"two key headers", call{keys: []string{client.NewKey(), client.NewKey()}, body: e.cfg.Body}},
		{"a payload conflict", call{keys: []string{k}, body: variant(e.cfg.Body)}},
	}
	var seen []string
	for _, tc := range cases {
		tc.c.method, tc.c.path = e.cfg.method, e.cfg.path
		a, err := e.do(ctx, tc.c)
		if err != nil {
			return failErr(err)
		}
		if a.status < 400 {
			continue
		}
		if msg := erpEnvelope(a, nil, ""); msg != "" {
			return fail("%s: %s", tc.label, msg)
		}
		seen = append(seen, a.String())
	}
	if len(seen) == 0 {
		return fail("no error answer to check: an invalid body, a malformed key, two key headers and a payload conflict all got 2xx")
	}
	return pass("%s carry request_id = X-Request-ID", strings.Join(seen, ", "))
}

// scopeRoute: the key of a Route call used on OtherRoute is another record
// (the scope holds the method and route): it runs there (no 409, no
// replay), and the Route record is intact.
func scopeRoute(ctx context.Context, e *env) Result {
	k := client.NewKey()
	a1, id, r, ok := e.create(ctx, k, noOtherID)
	if !ok {
		return r
	}
	a2, err := e.do(ctx, call{method: e.cfg.otherMethod, path: e.otherPath(id), keys: []string{k}, body: "{}"})
	if err != nil {
		return failErr(err)
	}
	switch {
	case a2.status == http.StatusConflict && (oneOf(a2.code, e.rules.mismatchCodes) || oneOf(a2.code, e.rules.inFlightCodes)):
		return fail("the key of %s %s on %s %s got %s: the scope lacks the method and route", e.cfg.method, e.cfg.path, e.cfg.otherMethod, e.cfg.otherPath, a2)
	case a2.marker(e.rules) == "true" || a2.sameAs(a1):
		return fail("the key of %s %s on %s %s got a replay: the scope lacks the method and route", e.cfg.method, e.cfg.path, e.cfg.otherMethod, e.cfg.otherPath)
	case a2.status >= 500 || a2.status == http.StatusBadRequest || a2.status == http.StatusNotFound || a2.status == http.StatusMethodNotAllowed:
		return fail("%s %s with a used key got %s, want its own answer", e.cfg.otherMethod, e.cfg.otherPath, a2)
	}
	if r, ok := e.postSame(ctx, k, e.cfg.Body, a1, "after the key ran on %s %s, the original request got %s, want its cached answer", e.cfg.otherMethod, e.cfg.otherPath); !ok {
		return r
	}
	return pass("one key, two routes, two records (%s %s answered %s)", e.cfg.otherMethod, e.cfg.otherPath, a2)
}

// failedRetryable: an unexpected 5xx is not stored as final: a same-key,
// same-payload retry runs again and is not marked as a replay.
func failedRetryable(ctx context.Context, e *env) Result {
	if e.cfg.FailBody == "" {
		return skip("needs --fail-body (a request that fails with a 5xx)")
	}
	k := client.NewKey()
	f1, err := e.post(ctx, k, e.cfg.FailBody, 0)
	if err != nil {
		return failErr(err)
	}
	if f1.status < 500 {
		return fail("the failing body got %s, want a 5xx (set --fail-body)", f1)
	}
	if m := f1.marker(e.rules); m != "false" {
		return fail("a first failure carries %s %q, want false", e.rules.replayHeader, m)
	}
	f2, err := e.post(ctx, k, e.cfg.FailBody, 0)
	if err != nil {
		return failErr(err)
	}
	switch {
	case f2.marker(e.rules) == "true":
		return fail("a same-key retry of a %d was replayed: a 5xx must be failed_retryable", f1.status)
	case f2.status == http.StatusConflict:
		return fail("a same-key retry of a %d got %s, want it to run again", f1.status, f2)
	case f2.header.Get("X-Request-ID") == f1.header.Get("X-Request-ID"):
		return fail("the retry's X-Request-ID is the failed attempt's")
	}
	return pass("%s not stored as final; the same-key retry ran again (%s)", f1, f2)
}

// testRoute: the test route answers without a credential and without a key,
// ignores any key (no 409 for another body under one key, never a replay)
// and sends none of the idempotency headers of an acquired request.
func testRoute(ctx context.Context, e *env) Result {
	ok := func(a *answer) string {
		switch {
		case a.status == http.StatusUnauthorized || a.status == http.StatusForbidden:
			return fmt.Sprintf("got %s: the test route is public", a)
		case a.status == http.StatusNotFound || a.status == http.StatusMethodNotAllowed:
			return fmt.Sprintf("got %s: no test route", a)
		case strings.Contains(strings.ToLower(a.code), "idempotency"):
			return fmt.Sprintf("got %s: the test route went through idempotency", a)
		case !a.is2xx() && a.status != http.StatusBadRequest && a.status != http.StatusUnprocessableEntity:
			return fmt.Sprintf("got %s, want 2xx or a format-validation 400/422", a)
		case a.marker(e.rules) == "true":
			return "was marked as a replay"
		}
		return ""
	}
	path := e.cfg.testPath
	a, err := e.do(ctx, call{method: e.cfg.testMethod, path: path, body: e.cfg.TestBody, noAuth: true})
	if err != nil {
		return failErr(err)
	}
	if msg := ok(a); msg != "" {
		return fail("%s %s without credential or key %s", e.cfg.testMethod, path, msg)
	}
	k := client.NewKey()
	for i, body := range []string{e.cfg.TestBody, e.cfg.TestBody, variant(e.cfg.TestBody)} {
		b, err := e.do(ctx, call{method: e.cfg.testMethod, path: path, body: body, keys: []string{k}, noAuth: true})
		if err != nil {
			return failErr(err)
		}
		if msg := ok(b); msg != "" {
			return fail("%s %s with a key (request %d of 3) %s", e.cfg.testMethod, path, i+1, msg)
		}
		if b.header.Get("Idempotency-Original-Request-ID") != "" && b.header.Get("Idempotency-Original-Request-ID") != b.header.Get("X-Request-ID") {
			return fail("%s %s with a reused key names an earlier request in Idempotency-Original-Request-ID: it acquired a record", e.cfg.testMethod, path)
		}
	}
	return pass("%s %s answered %s without credential or key, and ignored a reused key", e.cfg.testMethod, path, a)
}
