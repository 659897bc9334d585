package conform

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idemkit/client"
)

// commerceScenarios are the commerce policy's checks, in order.
func commerceScenarios() []Scenario {
	return []Scenario{
		{"key-grammar", "any string of up to 255 characters is a key (non-ASCII too); 256 characters get 400", keyGrammar},
		{"key-comma", "a key with a comma is one key, never split", keyComma},
		{"replay-marker", "a same-key repeat is the cached answer, byte-exact, with Idempotent-Replayed: true", replayMarker},
		{"input-mismatch", "the same key with another input gets 409 idempotency-mismatch, never the cached body", mismatch},
		{"operation-mismatch", "the same key on another operation gets 409 idempotency-mismatch and nothing runs", operationMismatch},
		{"in-flight", "a duplicate of a pending request waits for its answer, or is told to come back (Retry-After)", inWindow(inFlight)},
		{"sync-pending-action", "a sync duplicate still unanswered when its wait budget ends gets the pending Action with Retry-After, never 409, and any Action it names exists", inWindow(syncPendingAction)},
		{"in-flight-async", "an async duplicate of a pending request gets the pending action at once; nothing runs twice", inWindow(inFlightAsync)},
		{"pending-action", "an async duplicate of a pending request is the pending Action: never settled, never 409, with Retry-After, and any Action it names exists", inWindow(pendingAction)},
		{"retry-on-link", "Action.retry of a failed Action starts a new one linked to it by on, on the answer and on every read", retryOnLink},
		{"if-match-stale", "GET carries a strong ETag; a write with If-Match of a version the Action moved on from is refused (409), the current one is not", ifMatchStale},
		{"inbox-private", "a write refused as stale waits in the caller's inbox; another worker can neither list nor discard it (404)", inboxPrivate},
		{"settled-replay", "a replay after the Action settled is that Action in its final status, not the answer recorded at creation", settledReplay},
		{"rejected-at-door", "a request rejected at the door (400, 401) records nothing", rejectedAtDoor},
		{"failure-replayed", "a failed action, 5xx included, is stored and replayed as failed", failureReplayed},
		{"get-ignores-key", "GET does not honour Idempotency-Key", getIgnoresKey},
		{"scope-namespace", "the same key in another namespace names another record", scopeBy(ScopeNamespace)},
		{"scope-worker", "the same key from another calling worker names another record", scopeBy(ScopeWorker)},
	}
}

// keyComma: a key holding a comma is one key: it is accepted, replayed as
// itself, and its part before the comma is another key.
func keyComma(ctx context.Context, e *env) Result {
	head := "cart-" + randomKey(20, "")
	k := head + ",checkout-" + randomKey(8, "")
	a1, r, ok := e.postOK(ctx, k, e.cfg.Body, "a key with a comma")
	if !ok {
		return r
	}
	if r, ok := e.postSame(ctx, k, e.cfg.Body, a1, "a repeat with the comma key got %s, want the cached answer"); !ok {
		return r
	}
	a3, err := e.post(ctx, head, e.cfg.Body, 0)
	if err != nil {
		return failErr(err)
	}
	if !a3.is2xx() || a3.marker(e.rules) == "true" || a3.sameAs(a1) {
		return fail("the part before the comma, as a key of its own, got %s (replay %q), want a fresh 2xx: the key was split at the comma", a3, a3.marker(e.rules))
	}
	return pass("a key with a comma is one key")
}

// operationMismatch: a key used on Route, then on OtherRoute (another
// operation on the created resource), gets 409 idempotency-mismatch; the
// other operation did not run (with the default other route, cancel: the
// resource did not become cancelled), and the key's record is intact.
func operationMismatch(ctx context.Context, e *env) Result {
	k := client.NewKey()
	a1, id, r, ok := e.create(ctx, k, noOtherID)
	if !ok {
		return r
	}
	getPath := strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(id))
	before, err := e.do(ctx, call{method: http.MethodGet, path: getPath})
	if err != nil {
		return failErr(err)
	}
	a2, err := e.do(ctx, call{method: e.cfg.otherMethod, path: e.otherPath(id), keys: []string{k}, body: "{}"})
	if err != nil {
		return failErr(err)
	}
	if a2.status != http.StatusConflict || !oneOf(a2.code, e.rules.mismatchCodes) {
		return fail("the key of %s %s on %s %s got %s, want 409 %s", e.cfg.method, e.cfg.path, e.cfg.otherMethod, e.cfg.otherPath, a2, strings.Join(e.rules.mismatchCodes, "|"))
	}
	if what, ok := leaks(a2, a1, e.cfg.Body); ok {
		return fail("the mismatch 409 carries %s", what)
	}
	after, err := e.do(ctx, call{method: http.MethodGet, path: getPath})
	if err != nil {
		return failErr(err)
	}
	// The other route's effect, with the defaults (cancel), is the status
	// "cancelled"; any other change is the resource's own life (a run
	// starts).
	if before.is2xx() && after.is2xx() && cancelled(status(after.body)) && !cancelled(status(before.body)) {
		return fail("the refused operation ran: the resource's status went from %q to %q", status(before.body), status(after.body))
	}
	if r, ok := e.postSame(ctx, k, e.cfg.Body, a1, "after the mismatch, the original request got %s, want its cached answer"); !ok {
		return r
	}
	return pass("409 %s on %s %s; nothing ran; the record is intact", a2.code, e.cfg.otherMethod, e.cfg.otherPath)
}

// rejectedAtDoor: a 400 (invalid body) and a 401 (unknown credential) under
// a key record nothing: the same key then runs.
func rejectedAtDoor(ctx context.Context, e *env) Result {
	if r := validationNotCached(ctx, e); r.Status != Pass {
		return r
	}
	k := client.NewKey()
	u, err := e.do(ctx, call{method: e.cfg.method, path: e.cfg.path, keys: []string{k}, body: e.cfg.Body, bearer: "conform-unknown-credential-" + randomKey(16, "")})
	if err != nil {
		return failErr(err)
	}
	if u.status != http.StatusUnauthorized && u.status != http.StatusForbidden {
		return fail("an unknown API key got %s, want 401 or 403", u)
	}
	v, err := e.post(ctx, k, e.cfg.Body, 0)
	if err != nil {
		return failErr(err)
	}
	if !v.is2xx() || v.marker(e.rules) == "true" {
		return fail("a valid request under the key of a %d got %s (replay %q), want a fresh 2xx: the rejection was recorded", u.status, v, v.marker(e.rules))
	}
	return pass("400 and %d recorded nothing; the key stayed free", u.status)
}

// failureReplayed: an action that fails with a 5xx is stored: a same-key
// repeat is the failure, byte-exact, marked as a replay (the key never
// tries again).
func failureReplayed(ctx context.Context, e *env) Result {
	if e.cfg.FailBody == "" {
		return skip("needs --fail-body (a request whose action fails with a 5xx)")
	}
	k := client.NewKey()
	f1, err := e.post(ctx, k, e.cfg.FailBody, 0)
	if err != nil {
		return failErr(err)
	}
	if f1.status < 500 {
		return fail("the failing body got %s, want a 5xx (set --fail-body)", f1)
	}
	if f1.marker(e.rules) == "true" {
		return fail("a first failure carries %s: true", e.rules.replayHeader)
	}
	f2, err := e.post(ctx, k, e.cfg.FailBody, 0)
	if err != nil {
		return failErr(err)
	}
	if !f2.sameAs(f1) || f2.marker(e.rules) != "true" {
		return fail("a same-key repeat of a failed action got %s (replay %q), want the stored failure byte-exact with %s: true", f2, f2.marker(e.rules), e.rules.replayHeader)
	}
	return pass("%s stored and replayed as failed", f1)
}

func cancelled(s string) bool { return s == "cancelled" || s == "canceled" }

// status is the "status" member of a JSON body ("" when none).
func status(body []byte) string {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Status
}

// inFlightAsync: while a slow request runs, a duplicate sent in async mode
// (ModeHeader: async) is answered before the first request finishes, with a
// 2xx that names no other resource than the first request's (the pending
// action), and the work runs once: a repeat after the first finished is its
// answer.
func inFlightAsync(ctx context.Context, e *env) Result {
	k := client.NewKey()
	first, d, r, ok := slowThenAsync(ctx, e, k)
	if !ok {
		return r
	}
	// Another resource is a second execution whenever the duplicate came:
	// never a verdict to try again (inWindow), which would hide it.
	if id := resourceID(d.body); d.is2xx() && id != "" && id != resourceID(first.body) {
		return fail("an async duplicate got resource %q, the first request's is %q: the request ran twice", id, resourceID(first.body))
	}
	switch {
	case d.sent.After(first.done):
		return late(skip("the first request finished in %v, before the async duplicate was sent: no in-flight window (use a slower body)", first.done.Sub(first.sent).Round(time.Millisecond)))
	case d.is2xx() && d.sameAs(first):
		return late(fail("an async duplicate (%s: async) got the first request's final answer: it waited instead of getting the pending action", e.cfg.ModeHeader))
	case !d.done.Before(first.done):
		return late(fail("an async duplicate (%s: async) was answered %s only after the first request finished: it waited", e.cfg.ModeHeader, d))
	}
	if !d.is2xx() {
		return fail("an async duplicate (%s: async) of a pending request got %s, want the pending action (2xx)", e.cfg.ModeHeader, d)
	}
	if r, ok := e.postSame(ctx, k, e.cfg.SlowBody, first, "a repeat after the first request finished got %s, want its cached answer"); !ok {
		return r
	}
	return pass("the async duplicate got %s at once; ran once", d)
}

// slowThenAsync sends the slow body under key k and, after the stagger and
// while the first request may still run, the same request in async mode
// (ModeHeader: async). It returns both answers, or the failed Result when
// either could not be sent or the first was not a 2xx, or a skip to try
// again (inWindow) when the duplicate reached the host first and ran.
func slowThenAsync(ctx context.Context, e *env, k string) (first, dup *answer, r Result, ok bool) {
	return slowThenMode(ctx, e, k, "async")
}

// slowThenMode is slowThenAsync with the duplicate sent in the given mode.
func slowThenMode(ctx context.Context, e *env, k, mode string) (first, dup *answer, r Result, ok bool) {
	return slowThen(ctx, e, k, mode, nil)
}

// slowThen is slowThenMode; then, when not nil, is called with the
// duplicate's answer as soon as it comes, before waiting for the first
// request (which may still run).
func slowThen(ctx context.Context, e *env, k, mode string, then func(dup *answer)) (first, dup *answer, r Result, ok bool) {
	type res struct {
		a   *answer
		err error
	}
	firstc := make(chan res, 1)
	go func() {
		a, err := e.post(ctx, k, e.cfg.SlowBody, 0)
		firstc <- res{a, err}
	}()
	select {
	case <-time.After(e.cfg.Stagger):
	case <-ctx.Done():
	}
	d, err := e.do(ctx, call{method: e.cfg.method, path: e.cfg.path, keys: []string{k}, body: e.cfg.SlowBody,
		header: http.Header{e.cfg.ModeHeader: {mode}}})
	if err == nil && then != nil {
		then(d)
	}
	f := <-firstc
	switch {
	case err != nil:
		return nil, nil, failErr(err), false
	case f.err != nil:
		return nil, nil, failErr(f.err), false
	case !f.a.is2xx():
		return nil, nil, fail("the first request got %s, want 2xx", f.a), false
	case f.a.marker(e.rules) == "true":
		// The duplicate reached the host first and ran (a loaded machine
		// held the first request): the roles are swapped, so neither
		// answer says how a duplicate of a pending request is treated.
		return nil, nil, late(skip("the duplicate reached the host before the first request, which got %s marked as a replay: no in-flight window (a loaded machine)", f.a)), false
	}
	return f.a, d, Result{}, true
}
