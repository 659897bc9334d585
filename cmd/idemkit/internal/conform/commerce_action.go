package conform

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idemkit/client"
)

// The commerce policy's Action: a key binds one Action, and every answer
// about it is that Action as it is now.

// settled reports a final status of an Action.
func settled(s string) bool {
	return s == "completed" || s == "failed" || cancelled(s)
}

// settledReplay: once the Action a key created has settled (the checker
// settles it through OtherRoute, by default its cancel, under a key of its
// own, and waits for a final status on GetPath), a replay of the key is
// that Action in its final status: the same resource, the status GET
// reads, marked as a replay — never the pending answer recorded at
// creation. With FailedRunBody, an Action that failed after its creation
// replays as failed.
func settledReplay(ctx context.Context, e *env) Result {
	k := client.NewKey()
	_, id, r, ok := e.create(ctx, k, "the created answer names no runId or id: nothing to read")
	if !ok {
		return r
	}
	if _, err := e.do(ctx, call{method: e.cfg.otherMethod, path: e.otherPath(id), keys: []string{client.NewKey()}, body: "{}"}); err != nil {
		return failErr(err)
	}
	getPath := strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(id))
	final := ""
	for deadline := time.Now().Add(e.cfg.Timeout); final == ""; {
		g, err := e.do(ctx, call{method: http.MethodGet, path: getPath})
		if err != nil {
			return failErr(err)
		}
		if st := status(g.body); g.is2xx() && settled(st) {
			final = st
			break
		}
		if time.Now().After(deadline) {
			return fail("the Action did not settle within %v after %s %s (GET reads %s %q)", e.cfg.Timeout, e.cfg.otherMethod, e.cfg.otherPath, g, status(g.body))
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return failErr(ctx.Err())
		}
	}
	a, err := e.post(ctx, k, e.cfg.Body, 0)
	if err != nil {
		return failErr(err)
	}
	switch {
	case !a.is2xx():
		return fail("a replay of a settled Action got %s, want 2xx", a)
	case a.marker(e.rules) != "true":
		return fail("a replay of a settled Action lacks %s: true", e.rules.replayHeader)
	case resourceID(a.body) != id:
		return fail("a replay of a settled Action names %q, want the Action %q", resourceID(a.body), id)
	case status(a.body) != final:
		return fail("a replay of an Action now %q answers status %q: the answer recorded at creation, not the Action in its final status", final, status(a.body))
	}
	if r, ok := failedReplay(ctx, e); !ok {
		return r
	}
	return pass("the replay is the Action in its final status (%s; a failed one too, with --failed-run-body)", final)
}

// pendingAction: an async duplicate (ModeHeader: async) of a request still
// running is the pending Action itself: a 2xx naming the same resource as
// the first request's answer, in a status that is not final — not a bare
// request id.
func pendingAction(ctx context.Context, e *env) Result {
	first, d, r, ok := slowThenAsync(ctx, e, client.NewKey())
	if !ok {
		return r
	}
	switch {
	case d.sent.After(first.done):
		return skip("the first request finished in %v, before the async duplicate was sent: no in-flight window (use a slower body)", first.done.Sub(first.sent).Round(time.Millisecond))
	case !d.is2xx():
		return fail("an async duplicate of a pending request got %s, want the pending Action (2xx)", d)
	}
	id, want := resourceID(d.body), resourceID(first.body)
	switch {
	case id == "":
		return fail("an async duplicate's answer names no runId or id: a bare acknowledgement, not the pending Action %q", want)
	case id != want:
		return fail("an async duplicate names %q, the first request's Action is %q", id, want)
	case settled(status(d.body)):
		return fail("an async duplicate answered the Action settled (%q) while the first request still ran", status(d.body))
	}
	return pass("the async duplicate is the pending Action %s (%s)", id, status(d.body))
}

// syncPendingAction: a duplicate sent with ModeHeader: sync while a slow
// request runs, and not answered with the first request's answer (its wait
// budget ended first), is the pending action: 202 with Retry-After and the
// replay marker, naming no other resource than the first request's; never
// 409 in flight. A duplicate whose budget outlasted the first request gets
// the first's answer, which passes too, saying the answer past the budget
// was not exercised (a slower --slow-body, or a shorter wait budget such as
// idemkit dev --idempotency-wait, exercises it).
func syncPendingAction(ctx context.Context, e *env) Result {
	first, d, r, ok := slowThenMode(ctx, e, client.NewKey(), "sync")
	if !ok {
		return r
	}
	switch {
	case d.sent.After(first.done):
		return skip("the first request finished in %v, before the sync duplicate was sent: no in-flight window (use a slower body)", first.done.Sub(first.sent).Round(time.Millisecond))
	case d.is2xx() && d.sameAs(first):
		return pass("the sync duplicate waited within its budget and got the first's answer (%v); the answer past the budget is not exercised: a slower --slow-body or a shorter wait budget (idemkit dev --idempotency-wait) shows it",
			first.done.Sub(first.sent).Round(time.Millisecond))
	case d.status == http.StatusConflict:
		return fail("a sync duplicate whose wait budget ended got %s, want the pending Action (202 with Retry-After)", d)
	case d.status != http.StatusAccepted:
		return fail("a sync duplicate of a request in progress got %s, want the pending Action (202 with Retry-After) or, within its budget, the first's answer", d)
	case d.marker(e.rules) != "true":
		return fail("the pending Action answered to a sync duplicate lacks %s: true", e.rules.replayHeader)
	}
	if ra, ok := client.RetryAfter(d.header.Get("Retry-After"), time.Now()); !ok || ra > maxLiveRetryAfter {
		return fail("the pending Action answered to a sync duplicate has Retry-After %q, want a poll interval of at most %s", d.header.Get("Retry-After"), maxLiveRetryAfter)
	}
	if id := resourceID(d.body); id != "" && id != resourceID(first.body) {
		return fail("a sync duplicate got resource %q, the first request's is %q: the request ran twice", id, resourceID(first.body))
	}
	return pass("the sync duplicate got the pending action %s with Retry-After %s", d, d.header.Get("Retry-After"))
}
