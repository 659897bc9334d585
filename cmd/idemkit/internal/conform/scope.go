package conform

import (
	"context"
	"net/url"
	"strings"

	"github.com/idemkit/idemkit/client"
)

// isolation: the same key under two credentials names two records: the
// other credential's first request with the key runs (a fresh 2xx naming
// another resource, not marked as a replay), also with another body (no
// 409), and the first credential's repeat is still its own cached answer.
// who names the other credential in failures.
func isolation(ctx context.Context, e *env, other call, who string) Result {
	k := client.NewKey()
	a, r, ok := e.postOK(ctx, k, e.cfg.Body, "the first credential")
	if !ok {
		return r
	}
	other.method, other.path, other.keys, other.body = e.cfg.method, e.cfg.path, []string{k}, e.cfg.Body
	b, err := e.do(ctx, other)
	if err != nil {
		return failErr(err)
	}
	if !b.is2xx() {
		return fail("%s with the first credential's key got %s, want a fresh 2xx", who, b)
	}
	idA, idB := resourceID(a.body), resourceID(b.body)
	switch {
	case (idA != "" && idA == idB) || (idA == "" && b.sameAs(a)):
		return fail("%s got the first credential's cached answer for the same key", who)
	case b.marker(e.rules) == "true":
		return fail("%s's first request with the first credential's key is marked as a replay", who)
	}
	k2 := client.NewKey()
	if _, r, ok := e.postOK(ctx, k2, e.cfg.Body, "the first credential"); !ok {
		return r
	}
	other.keys, other.body = []string{k2}, variant(e.cfg.Body)
	d, err := e.do(ctx, other)
	if err != nil {
		return failErr(err)
	}
	if !d.is2xx() {
		return fail("%s, using the first credential's key with another body, got %s, want a fresh 2xx", who, d)
	}
	if r, ok := e.postSame(ctx, k, e.cfg.Body, a, "after %s used the key, the first credential's repeat got %s, want its own cached answer", who); !ok {
		return r
	}
	return pass("one key, two credentials, two records")
}

// scopeBy returns the scope-<part> scenario: the same key under a
// credential that differs in part only (Config.ScopeKeys) names another
// record.
func scopeBy(part string) func(context.Context, *env) Result {
	return func(ctx context.Context, e *env) Result {
		k, ok := e.cfg.ScopeKeys[part]
		if !ok {
			return skip("needs --scope-key %s=KEY (a credential that differs from the first --api-key in its %s only)", part, part)
		}
		return isolation(ctx, e, call{bearer: k}, "a credential of another "+part)
	}
}

// otherPath is OtherRoute's path for the resource id.
func (e *env) otherPath(id string) string {
	return strings.ReplaceAll(e.cfg.otherPath, "{id}", url.PathEscape(id))
}

// create POSTs Body under key and returns the answer and the created id;
// when the answer names no id, the Result is the failure noID.
func (e *env) create(ctx context.Context, key, noID string) (*answer, string, Result, bool) {
	a, r, ok := e.postOK(ctx, key, e.cfg.Body, "creating a resource")
	if !ok {
		return nil, "", r, false
	}
	id := resourceID(a.body)
	if id == "" {
		return nil, "", fail("%s", noID), false
	}
	return a, id, Result{}, true
}

// postOK POSTs body under key and wants a 2xx; otherwise ok is false and
// the Result is the failure "<who> got <answer>, want 2xx" (or the
// request's error).
func (e *env) postOK(ctx context.Context, key, body, who string) (*answer, Result, bool) {
	a, err := e.post(ctx, key, body, 0)
	if err != nil {
		return nil, failErr(err), false
	}
	if !a.is2xx() {
		return nil, fail("%s got %s, want 2xx", who, a), false
	}
	return a, Result{}, true
}

// postSame POSTs body under key and wants the cached answer want
// byte-exact; otherwise ok is false and the Result is the failure
// format(args..., <answer>) (or the request's error).
func (e *env) postSame(ctx context.Context, key, body string, want *answer, format string, args ...any) (Result, bool) {
	a, err := e.post(ctx, key, body, 0)
	if err != nil {
		return failErr(err), false
	}
	if !a.sameAs(want) {
		return fail(format, append(args, a)...), false
	}
	return Result{}, true
}

// noOtherID is create's failure for the scenarios that send the created id
// to OtherRoute.
const noOtherID = "the created answer has no runId or id (set the other route)"
