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

// Writes decided offline: a client reads the Version it decides against
// (GET's strong ETag) and sends it back as If-Match; a write decided
// against a version the Action has since moved on from is refused, and
// the refused write waits in the caller's own inbox.

// staleWrite creates an Action, reads its ETag, waits until the Action
// changes (settling it through OtherRoute when it does not change on its
// own) and sends OtherRoute with If-Match of the first ETag. It returns
// the stale refusal, the first and the current ETag and the resource's id,
// or a Result.
func (e *env) staleWrite(ctx context.Context) (refused *answer, first, current, id string, res Result, ok bool) {
	for range 3 {
		_, rid, r, ok := e.create(ctx, client.NewKey(), "the created answer names no runId or id: nothing to read")
		if !ok {
			return nil, "", "", "", r, false
		}
		id = rid
		getPath := strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(id))
		g, err := e.do(ctx, call{method: http.MethodGet, path: getPath})
		if err != nil {
			return nil, "", "", "", failErr(err), false
		}
		first = g.header.Get("ETag")
		if !g.is2xx() || first == "" || strings.HasPrefix(first, "W/") || !strings.HasPrefix(first, `"`) {
			return nil, "", "", "", fail("GET %s got %s with ETag %q, want 2xx with a strong ETag (the Version a write is decided against)", e.cfg.GetPath, g, first), false
		}
		if settled(status(g.body)) {
			continue // settled before it could be read in an earlier version: try a fresh one
		}
		if _, err := e.do(ctx, call{method: e.cfg.otherMethod, path: e.otherPath(id), keys: []string{client.NewKey()}, body: "{}"}); err != nil {
			return nil, "", "", "", failErr(err), false
		}
		for deadline := time.Now().Add(e.cfg.Timeout); ; {
			g, err = e.do(ctx, call{method: http.MethodGet, path: getPath})
			if err != nil {
				return nil, "", "", "", failErr(err), false
			}
			if current = g.header.Get("ETag"); current != first {
				break
			}
			if time.Now().After(deadline) {
				return nil, "", "", "", fail("the ETag of the Action stayed %s after %s %s", first, e.cfg.otherMethod, e.cfg.otherPath), false
			}
			time.Sleep(100 * time.Millisecond)
		}
		a, err := e.do(ctx, call{method: e.cfg.otherMethod, path: e.otherPath(id), keys: []string{client.NewKey()}, body: "{}",
			header: http.Header{"If-Match": {first}}})
		if err != nil {
			return nil, "", "", "", failErr(err), false
		}
		if a.status != http.StatusConflict && a.status != http.StatusPreconditionFailed {
			return nil, "", "", "", fail("%s %s with If-Match: %s, a version the Action has moved on from (now %s), got %s, want it refused (409)", e.cfg.otherMethod, e.cfg.otherPath, first, current, a), false
		}
		return a, first, current, id, Result{}, true
	}
	return nil, "", "", "", skip("every Action settled before its first read: no earlier version to decide against"), false
}

// ifMatchStale: GET of the Action carries a strong ETag; a write with
// If-Match of a version the Action has moved on from is refused (409), and
// the same write with the current ETag is not.
func ifMatchStale(ctx context.Context, e *env) Result {
	a, first, current, id, r, ok := e.staleWrite(ctx)
	if !ok {
		return r
	}
	// With the current version the same write is not that refusal.
	b, err := e.do(ctx, call{method: e.cfg.otherMethod, path: e.otherPath(id), keys: []string{client.NewKey()}, body: "{}",
		header: http.Header{"If-Match": {current}}})
	if err != nil {
		return failErr(err)
	}
	if b.status == a.status && b.code == a.code {
		return fail("%s %s with If-Match of the current version %s got %s, the same refusal as a stale one: If-Match is not compared", e.cfg.otherMethod, e.cfg.otherPath, current, b)
	}
	return pass("If-Match: %s refused with %s once the Action was at %s; the same write with If-Match: %s got %s, not that refusal", first, a, current, current, b)
}

// inboxPrivate: the write refused as stale waits in the caller's inbox
// (the refusal names it: details.inboxId); another worker of the same
// namespace (--scope-key worker) can neither list nor discard it (404,
// never 403), while the caller lists it.
func inboxPrivate(ctx context.Context, e *env) Result {
	other, ok := e.cfg.ScopeKeys[ScopeWorker]
	if !ok {
		return skip("needs --scope-key worker=KEY (a credential of another worker of the same namespace)")
	}
	a, _, _, _, r, ok := e.staleWrite(ctx)
	if !ok {
		if r.Status == Fail {
			return skip("needs a write refused as stale (if-match-stale: %s)", r.Detail)
		}
		return r
	}
	var env struct {
		Details struct {
			InboxID string `json:"inboxId"`
		} `json:"details"`
	}
	_ = json.Unmarshal(a.body, &env)
	id := env.Details.InboxID
	if id == "" {
		return fail("the stale refusal %s names no inbox entry (details.inboxId)", a)
	}
	listed := func(bearer string) (bool, *answer, error) {
		l, err := e.do(ctx, call{method: http.MethodGet, path: "/inbox", bearer: bearer})
		if err != nil {
			return false, nil, err
		}
		return strings.Contains(string(l.body), id), l, nil
	}
	if in, l, err := listed(e.cfg.APIKeys[0]); err != nil {
		return failErr(err)
	} else if !l.is2xx() || !in {
		return fail("the caller's GET /inbox got %s without its entry %s", l, id)
	}
	if in, l, err := listed(other); err != nil {
		return failErr(err)
	} else if in {
		return fail("another worker's GET /inbox (%s) lists the caller's entry", l)
	}
	d, err := e.do(ctx, call{method: http.MethodPost, path: "/inbox/" + url.PathEscape(id) + "/discard", keys: []string{client.NewKey()}, body: "{}", bearer: other})
	if err != nil {
		return failErr(err)
	}
	if d.status != http.StatusNotFound {
		return fail("another worker's discard of the caller's entry got %s, want 404 (not discoverable)", d)
	}
	if in, _, err := listed(e.cfg.APIKeys[0]); err != nil {
		return failErr(err)
	} else if !in {
		return fail("the caller's entry is gone after another worker's refused discard")
	}
	return pass("the refused write waits in the caller's inbox; another worker neither lists nor discards it (404)")
}
