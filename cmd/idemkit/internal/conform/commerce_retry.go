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

// link is the member "on" of an Action (the failed Action a retry is
// linked to): at the top of the body or in one of its extensions.
func link(body []byte) string {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if s, _ := v["on"].(string); s != "" {
		return s
	}
	exts, _ := v["extensions"].(map[string]any)
	for _, x := range exts {
		if m, ok := x.(map[string]any); ok {
			if s, _ := m["on"].(string); s != "" {
				return s
			}
		}
	}
	return ""
}

// failedAction creates an Action with FailedRunBody under key and waits for
// GET to read it failed; it returns its id.
func (e *env) failedAction(ctx context.Context, key string) (string, Result, bool) {
	a, err := e.post(ctx, key, e.cfg.FailedRunBody, 0)
	if err != nil {
		return "", failErr(err), false
	}
	id := resourceID(a.body)
	if !a.is2xx() || id == "" {
		return "", fail("the failing Action (--failed-run-body) got %s naming %q, want a created Action", a, id), false
	}
	getPath := strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(id))
	for deadline := time.Now().Add(e.cfg.Timeout); ; {
		g, err := e.do(ctx, call{method: http.MethodGet, path: getPath})
		if err != nil {
			return "", failErr(err), false
		}
		if status(g.body) == "failed" {
			return id, Result{}, true
		}
		if time.Now().After(deadline) {
			return "", fail("the Action of --failed-run-body did not fail within %v (GET reads %q)", e.cfg.Timeout, status(g.body)), false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// retryOnLink: Action.retry (RetryRoute on a failed Action, under a key of
// its own) starts a new Action linked to the failed one by on, on the
// retry's answer and on a read of the new Action.
func retryOnLink(ctx context.Context, e *env) Result {
	if e.cfg.FailedRunBody == "" {
		return skip("needs --failed-run-body (a request whose Action fails after it was created)")
	}
	id, r, ok := e.failedAction(ctx, client.NewKey())
	if !ok {
		return r
	}
	a, err := e.do(ctx, call{method: e.cfg.retryMethod, path: strings.ReplaceAll(e.cfg.retryPath, "{id}", url.PathEscape(id)),
		keys: []string{client.NewKey()}, body: "{}"})
	if err != nil {
		return failErr(err)
	}
	nid := resourceID(a.body)
	switch {
	case !a.is2xx() || nid == "" || nid == id:
		return fail("%s %s of the failed Action got %s naming %q, want a new Action", e.cfg.retryMethod, e.cfg.retryPath, a, nid)
	case link(a.body) != id:
		return fail("the retry's answer links %q by on, want the failed Action %q", link(a.body), id)
	}
	g, err := e.do(ctx, call{method: http.MethodGet, path: strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(nid))})
	if err != nil {
		return failErr(err)
	}
	if !g.is2xx() || link(g.body) != id {
		return fail("GET of the retry got %s linking %q by on, want the failed Action %q", g, link(g.body), id)
	}
	return pass("the retry %s is linked by on to the failed Action on its answer and on a read", nid)
}

// failedReplay: a replay of an Action that failed after it was created is
// that Action, failed (with --failed-run-body).
func failedReplay(ctx context.Context, e *env) (Result, bool) {
	if e.cfg.FailedRunBody == "" {
		return Result{}, true
	}
	k := client.NewKey()
	id, r, ok := e.failedAction(ctx, k)
	if !ok {
		return r, false
	}
	a, err := e.post(ctx, k, e.cfg.FailedRunBody, 0)
	if err != nil {
		return failErr(err), false
	}
	if !a.is2xx() || a.marker(e.rules) != "true" || resourceID(a.body) != id || status(a.body) != "failed" {
		return fail("a replay of an Action that failed after its creation got %s (replay %q) status %q, want the Action %q failed", a, a.marker(e.rules), status(a.body), id), false
	}
	return Result{}, true
}
