package conform

import (
	"context"
	"encoding/json"
	"fmt"
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
// running is the pending Action: a 2xx in a status that is not final,
// marked as a replay, with a Retry-After poll interval of at most
// maxLiveRetryAfter, never a 409; it names no resource or the first
// request's, and any resource it names exists when named: the checker
// reads it at once (actionRead: its statusUrl, else GetPath), while the
// first request may still run, and fails on a 404 — the duplicate was told
// of a run that is not written, which the first request may never create —
// and on a read that answers another run than the first request's (a
// statusUrl alone can name another run).
// A pending answer that names nothing passes, saying so: a host whose run
// is written together with the first request's answer cannot name it
// before that answer is recorded. A duplicate that waited and got the
// first request's answer (the same status and resource, whether or not it
// arrived before the first request's own answer) has no pending answer to
// check and passes (in-flight-async fails it), once every try (inWindow)
// saw it: a duplicate that reached the host late gets that answer too.
func pendingAction(ctx context.Context, e *env) Result {
	var nr namedActionRead
	first, d, r, ok := slowThen(ctx, e, client.NewKey(), "async", nr.read(ctx, e))
	if !ok {
		return r
	}
	switch {
	case d.sent.After(first.done):
		return late(skip("the first request finished in %v, before the async duplicate was sent: no in-flight window (use a slower body)", first.done.Sub(first.sent).Round(time.Millisecond)))
	case d.is2xx() && d.sameAs(first):
		// Waited, whichever answer reached the client first: a host whose
		// waiters poll the record can answer a duplicate before the first
		// request's answer arrives, so the order they arrive in says nothing.
		// A duplicate that reached the host late gets the same answer:
		// tried again, so that the pending answer is checked when the
		// host gives one.
		return late(pass("the async duplicate waited and got the first request's answer (%s): no pending answer to check (in-flight-async fails a duplicate that waits)", d))
	case d.status == http.StatusConflict:
		return fail("an async duplicate of a pending request got %s, want the pending Action (2xx with Retry-After), never 409", d)
	case !d.is2xx():
		return fail("an async duplicate of a pending request got %s, want the pending Action (2xx with Retry-After)", d)
	case settled(status(d.body)):
		return fail("an async duplicate answered the Action settled (%q) while the first request still ran", status(d.body))
	case d.marker(e.rules) != "true":
		return fail("the pending Action answered to an async duplicate lacks %s: true", e.rules.replayHeader)
	}
	ra := d.header.Get("Retry-After")
	if after, ok := client.RetryAfter(ra, time.Now()); !ok || after > maxLiveRetryAfter {
		return fail("the pending Action answered to an async duplicate has Retry-After %q, want a poll interval of at most %s", ra, maxLiveRetryAfter)
	}
	id := resourceID(d.body)
	if r, ok := nr.check("async", d, first); !ok {
		return r
	}
	if !nr.named {
		return pass("%s with Retry-After %s: the pending answer names no run yet (a host names the first request's run once it is written; one that writes it with the first request's answer, once that answer is recorded)", d, ra)
	}
	return pass("the async duplicate is the pending Action %s (%s, Retry-After %s), which GET reads (%s)", orNone(id), status(d.body), ra, nr.answer)
}

// namedActionRead reads, as soon as a duplicate's pending answer comes and
// while the first request may still run, the Action that answer names
// (actionRead), and then checks it is the first request's.
type namedActionRead struct {
	c      call
	named  bool
	answer *answer // the GET of the Action named
	err    error   // sending the GET
	unread error   // why the Action named cannot be read
}

// read returns slowThen's callback: it reads the Action a 2xx answer names.
func (n *namedActionRead) read(ctx context.Context, e *env) func(*answer) {
	return func(d *answer) {
		if !d.is2xx() {
			return
		}
		if n.c, n.named, n.unread = e.actionRead(d.body); n.named && n.unread == nil {
			n.answer, n.err = e.do(ctx, n.c)
		}
	}
}

// check fails a pending answer d (of the given mode) that names another
// resource than the first request's, or names one that could not be read
// when named (a 404: the duplicate was told of a run that is not written,
// which the first request may never create), or whose read names no run
// (a placeholder answered for any id shows nothing exists), or answers
// another run than the one named or than the first request's (a statusUrl
// naming another run, with no id beside it, is caught here).
func (n *namedActionRead) check(mode string, d, first *answer) (Result, bool) {
	id, want := resourceID(d.body), resourceID(first.body)
	if id != "" && id != want {
		return fail("a %s duplicate names %q, the first request's Action is %q: the request ran twice or the answer is another's", mode, id, want), false
	}
	if !n.named {
		return Result{}, true
	}
	switch {
	case n.unread != nil:
		return fail("%v", n.unread), false
	case n.err != nil:
		return failErr(n.err), false
	case n.answer.status == http.StatusNotFound:
		return fail("the %s duplicate names run %s, which does not exist: %s %s answered 404 (a pending answer names a run only once it is written)", mode, orNone(id), n.c.method, n.c.path), false
	case !n.answer.is2xx():
		return fail("the %s duplicate names run %s; reading it (%s %s) got %s, want 2xx", mode, orNone(id), n.c.method, n.c.path, n.answer), false
	}
	got := resourceID(n.answer.body)
	switch {
	case got == "":
		return fail("the %s duplicate names run %s; reading it (%s %s) got %s naming no run: a read of the Action names its id, else nothing shows it exists or is the first request's", mode, orNone(id), n.c.method, n.c.path, n.answer), false
	case id != "" && got != id:
		return fail("the %s duplicate names run %s; reading it (%s %s) got run %q", mode, id, n.c.method, n.c.path, got), false
	case want != "" && got != want:
		return fail("the %s duplicate names run %s; reading it (%s %s) got run %q, and the first request's Action is %q", mode, orNone(id), n.c.method, n.c.path, got, want), false
	}
	return Result{}, true
}

// actionRead is the GET of the Action an answer names: its statusUrl,
// which must be on the API's own origin (a relative one resolved against
// BaseURL), else GetPath with the id it names (runId or id). named is
// false when the answer names neither. A statusUrl on another origin (or
// downgrading the scheme) is an error, id or not: a client polling it
// leaves the API, and it is never sent the API key.
func (e *env) actionRead(body []byte) (c call, named bool, err error) {
	var v struct {
		StatusURL string `json:"statusUrl"`
	}
	_ = json.Unmarshal(body, &v)
	id := resourceID(body)
	if v.StatusURL != "" {
		base, berr := url.Parse(e.cfg.BaseURL)
		u, uerr := url.Parse(v.StatusURL)
		if berr == nil && uerr == nil {
			if abs := base.ResolveReference(u); sameOrigin(abs, base) {
				return call{method: http.MethodGet, path: v.StatusURL, url: abs.String()}, true, nil
			}
		}
		return call{}, true, fmt.Errorf("the answer names statusUrl %q, not on the API's origin %s: a status link must resolve under the origin the request was made to (a relative path, or an absolute URL on that origin, never downgrading its scheme)", v.StatusURL, shownURL(e.cfg.BaseURL))
	}
	if id == "" {
		return call{}, false, nil
	}
	return call{method: http.MethodGet, path: strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(id))}, true, nil
}

// sameOrigin reports whether u and base have the same scheme, host and
// port (a missing port being the scheme's default).
func sameOrigin(u, base *url.URL) bool {
	port := func(x *url.URL) string {
		if p := x.Port(); p != "" {
			return p
		}
		switch strings.ToLower(x.Scheme) {
		case "https":
			return "443"
		case "http":
			return "80"
		}
		return ""
	}
	return strings.EqualFold(u.Scheme, base.Scheme) && strings.EqualFold(u.Hostname(), base.Hostname()) && port(u) == port(base)
}

// orNone is id, or "(no id, by its statusUrl)" when it is empty.
func orNone(id string) string {
	if id == "" {
		return "(no id, by its statusUrl)"
	}
	return id
}

// syncPendingAction: a duplicate sent with ModeHeader: sync while a slow
// request runs, and not answered with the first request's answer (its wait
// budget ended first), is the pending action: 202 with Retry-After and the
// replay marker, naming no other resource than the first request's, and any
// resource it names exists when named (read at once, as pending-action
// does); never 409 in flight. A duplicate whose budget outlasted the first request gets
// the first's answer, which passes too once every try (inWindow) saw it,
// saying the answer past the budget was not exercised (a slower --slow-body, or a shorter wait budget such as
// idemkit dev --idempotency-wait, exercises it).
func syncPendingAction(ctx context.Context, e *env) Result {
	var nr namedActionRead
	first, d, r, ok := slowThen(ctx, e, client.NewKey(), "sync", nr.read(ctx, e))
	if !ok {
		return r
	}
	switch {
	case d.sent.After(first.done):
		return late(skip("the first request finished in %v, before the sync duplicate was sent: no in-flight window (use a slower body)", first.done.Sub(first.sent).Round(time.Millisecond)))
	case d.is2xx() && d.sameAs(first):
		// As in pending-action: a late duplicate gets the same answer.
		return late(pass("the sync duplicate waited within its budget and got the first's answer (%v); the answer past the budget is not exercised: a slower --slow-body or a shorter wait budget (idemkit dev --idempotency-wait) shows it",
			first.done.Sub(first.sent).Round(time.Millisecond)))
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
	if r, ok := nr.check("sync", d, first); !ok {
		return r
	}
	if nr.named {
		return pass("the sync duplicate got the pending action %s with Retry-After %s, naming run %s, which GET reads (%s)", d, d.header.Get("Retry-After"), orNone(resourceID(d.body)), nr.answer)
	}
	return pass("the sync duplicate got the pending action %s with Retry-After %s", d, d.header.Get("Retry-After"))
}
