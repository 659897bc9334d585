package apifn

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/apierr"
)

// Route is one route of the run API. Routes is the one list of them: the
// handler dispatches on it, `idemkit dev`'s gateway decides from it which
// requests pass the Lambda authorizer, and a test checks it against the
// api function's HttpApi events in template.yaml (both ways).
type Route struct {
	// Method is the HTTP method ("GET", "POST", "HEAD").
	Method string
	// Pattern is the path as template.yaml declares it: literal segments
	// and {name} parameters ("/runs/{runId}/cancel"). A parameter matches
	// one raw (still percent-encoded) segment, or two when the pattern's
	// segments are otherwise all matched: a runId may arrive in its split
	// form, <tenant>/<opaque>.
	Pattern string
	// Op is the operation id, as the OpenAPI document names it
	// ("createRun").
	Op string
	// Public routes need no credential (Auth: {Authorizer: NONE} in
	// template.yaml); every other route passes the Lambda authorizer first.
	Public bool
	// Idempotent routes run under Layer 1 (the Idempotency-Key header): a
	// retried request is answered from its record, never executed twice.
	// Their Layer-1 operation is Scope.
	Idempotent bool

	// check, when set, refuses a request before Layer 1 reads it (the
	// body's size and media type).
	check func(events.APIGatewayV2HTTPRequest) *apierr.Error
	// serve answers the route, under Layer 1 when Idempotent. It runs
	// after the credential (unless Public) and the runId's tenant binding
	// are checked: c carries the caller's tenant and the decoded runId.
	serve func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error)
}

// call is one authenticated request as a route's serve function sees it.
type call struct {
	ev     events.APIGatewayV2HTTPRequest
	tenant string // the credential's tenant ("" on a public route)
	runID  string // the decoded {runId}, bound to tenant ("" when none)
	// entryID is the {id} of an inbox route: one raw path segment ("" when
	// none; never a runId).
	entryID string
}

// Routes is the run API. Adding a route is one row here (with its serve
// function) plus its HttpApi event in template.yaml, which
// TestRoutesMatchTemplate requires, and a test of the handler.
var Routes = []Route{
	{Method: http.MethodPost, Pattern: "/runs", Op: "createRun", Idempotent: true, check: checkBody,
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.createRun(ctx, c.ev)
		}},
	{Method: http.MethodGet, Pattern: "/runs/{runId}", Op: "getRun", serve: serveGetRun},
	// HEAD is authorised exactly like GET (its own route in template.yaml).
	{Method: http.MethodHead, Pattern: "/runs/{runId}", Op: "getRun", serve: serveGetRun},
	// The body is not read, but Layer 1 digests it: it is bounded as
	// createRun's (any media type is accepted).
	{Method: http.MethodPost, Pattern: "/runs/{runId}/cancel", Op: "cancelRun", Idempotent: true, check: checkBodySize,
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.cancelRun(ctx, c.ev)
		}},
	// A new run of a failed run's workflow and inputs, linked by retryOf,
	// under the retry request's own key.
	{Method: http.MethodPost, Pattern: "/runs/{runId}/retry", Op: "retryRun", Idempotent: true, check: checkBodySize,
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.retryRun(ctx, c)
		}},
	// The caller's inbox of offline writes refused as decided against a
	// stale version (inbox.go).
	{Method: http.MethodGet, Pattern: "/inbox", Op: "listInbox",
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.listInbox(ctx, c)
		}},
	{Method: http.MethodPost, Pattern: "/inbox/{id}/resubmit", Op: "resubmitInboxEntry", Idempotent: true, check: checkBodySize,
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.resubmitInboxEntry(ctx, c)
		}},
	{Method: http.MethodPost, Pattern: "/inbox/{id}/discard", Op: "discardInboxEntry", Idempotent: true, check: checkBodySize,
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.discardInboxEntry(ctx, c)
		}},
	{Method: http.MethodGet, Pattern: "/runs/{runId}/effects", Op: "getRunEffects",
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.effects(ctx, c.runID, c.tenant)
		}},
	{Method: http.MethodGet, Pattern: "/runs/{runId}/events", Op: "streamRunEvents",
		serve: func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			return h.events(ctx, c.ev, c.runID, c.tenant)
		}},
	{Method: http.MethodGet, Pattern: "/.well-known/openwop", Op: "getCapabilities", Public: true,
		serve: func(h *Handler, _ context.Context, _ call) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(h.caps),
				Headers: map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300"}}, nil
		}},
	// The ERP policy's public format-validation route: no credential, no
	// Idempotency-Key, no idempotency record (workorder.go).
	{Method: http.MethodPost, Pattern: TestWorkOrderPath, Op: OpTestWorkOrder, Public: true, check: checkBodySize, serve: serveTestWorkOrder},
}

func serveGetRun(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
	return h.getRun(ctx, c.ev, c.runID, c.tenant)
}

// Scope is the Layer-1 operation of an idempotent route: the method and the
// pattern with each parameter replaced by its canonical value (params, by
// name), so a key is scoped to one resource's operation: one key reused on
// two runs' cancel never replays the first run's answer for the second.
// createRun's is "POST /runs" (OpCreateRun).
func (r Route) Scope(params map[string]string) string {
	segs := strings.Split(r.Pattern, "/")
	for i, s := range segs {
		if name, ok := paramName(s); ok {
			segs[i] = params[name]
		}
	}
	return r.Method + " " + strings.Join(segs, "/")
}

// Match is the route a request reached.
type Match struct {
	// Route is the matched route. For a HEAD request on a route with only
	// a GET row, the GET route (the handler answers HEAD like GET).
	Route Route
	// Params holds each parameter's raw segments (two for a split runId).
	Params map[string][]string
}

// MatchRoute finds the route of method and rawPath (the percent-encoded
// path). ok is false when no route has that path; when one has the path
// but not the method, ok is true, found is false and allow is the Allow
// header of the 405.
func MatchRoute(method, rawPath string) (m Match, allow string, found, ok bool) {
	segs := strings.Split(strings.TrimPrefix(rawPath, "/"), "/")
	pattern := ""
	for _, p := range patterns() {
		if params, hit := matchPattern(p, segs); hit {
			pattern, m.Params = p, params
			break
		}
	}
	if pattern == "" {
		return Match{}, "", false, false
	}
	var methods []string
	var get *Route
	public := false
	for i, r := range Routes {
		if r.Pattern != pattern {
			continue
		}
		public = public || r.Public
		if r.Method == method {
			m.Route, found = r, true
		}
		if r.Method == http.MethodGet {
			get = &Routes[i]
		}
		if r.Method != http.MethodHead {
			methods = append(methods, r.Method)
		}
	}
	if !found && method == http.MethodHead && get != nil {
		m.Route, found = *get, true
	}
	// HEAD is advertised only where every caller may use it: the public
	// capabilities document. On the run routes the deployed authorizer sees
	// HEAD only where template.yaml routes it, so it is not advertised.
	if public && get != nil {
		methods = append(methods, http.MethodHead)
	}
	return m, strings.Join(methods, ", "), found, true
}

// Authorized reports whether the request passes the Lambda authorizer
// before the handler, as the deployed HTTP API routes it: it matches a
// non-public route with that route's own method (a split runId counts as
// its route). Everything else reaches the handler through $default,
// unauthenticated.
func Authorized(method, rawPath string) bool {
	m, _, found, _ := MatchRoute(method, rawPath)
	return found && m.Route.Method == method && !m.Route.Public
}

// patterns lists the distinct patterns, most literal segments first, so a
// literal beats a parameter's split form ("/runs/acme/events" is the
// events route of runId "acme", not getRun of "acme/events").
func patterns() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range Routes {
		if !seen[r.Pattern] {
			seen[r.Pattern] = true
			out = append(out, r.Pattern)
		}
	}
	literals := func(p string) int {
		n := 0
		for _, s := range strings.Split(p, "/") {
			if _, ok := paramName(s); !ok && s != "" {
				n++
			}
		}
		return n
	}
	// Insertion sort, stable: the table is small.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && literals(out[j]) > literals(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func paramName(seg string) (string, bool) {
	if len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

// matchPattern matches path segments against a pattern: literals exactly,
// a parameter one segment, or two when the path has one segment more than
// the pattern (and the pattern has one parameter); its first segment is
// never empty.
func matchPattern(pattern string, segs []string) (map[string][]string, bool) {
	pat := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	extra := len(segs) - len(pat)
	nparams := 0
	for _, s := range pat {
		if _, ok := paramName(s); ok {
			nparams++
		}
	}
	if extra < 0 || extra > 1 || extra == 1 && nparams != 1 {
		return nil, false
	}
	params := map[string][]string{}
	i := 0
	for _, s := range pat {
		name, isParam := paramName(s)
		if !isParam {
			if segs[i] != s {
				return nil, false
			}
			i++
			continue
		}
		take := 1 + extra
		if segs[i] == "" {
			return nil, false
		}
		params[name] = segs[i : i+take]
		i += take
	}
	return params, true
}
