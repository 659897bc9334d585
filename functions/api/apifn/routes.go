package apifn

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
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
	// Gateway is the path template.yaml declares for the route when API
	// Gateway's HTTP API cannot express Pattern: it takes a path variable
	// only as a whole segment, so the custom-method form "/runs/{runId}:fork"
	// is declared "/runs/{runId}" (the segment "<runId>:fork" is one
	// variable there) and the handler matches the suffix. "" means Pattern.
	Gateway string
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
	// body's size and media type). A noBody route's is checkNoBody.
	check func(events.APIGatewayV2HTTPRequest) *apierr.Error
	// precheck, when set, reads the body as serve will (createRun's,
	// forkRun's) before Layer 1 claims the key: a refusal for the body
	// alone that the Guard's policy would not record (idem.Forget: a 400
	// validation_error under every policy, a 403) is answered there, at no
	// write (RED_TEAM 522), as check's are; any other refusal is left to
	// serve, under the claim, which records it as before. What it read it
	// may keep in c for serve. It is not run where Layer 1 answers first
	// (precheckable).
	precheck func(h *Handler, c *call) *apierr.Error
	// jsonBody says that serve reads the body as JSON whatever its
	// Content-Type: a body naming another tenant is refused before Layer
	// 1 reads it when Layer 1 would not (bodyTenantRefusal).
	jsonBody bool
	// noBody says that the route reads no body: its check is checkNoBody
	// (check is left unset), which takes a body only as strict JSON text,
	// whatever its Content-Type, and a body naming another tenant is
	// refused as on a jsonBody route, whatever its Content-Type
	// (bodyTenantRefusal).
	noBody bool
	// mints says that the route mints a runId under the caller's tenant
	// (createRun, retryRun, forkRun): a tenant holding a `~` is refused
	// before Layer 1 reads the request (mintRefusal).
	mints bool
	// serve answers the route, under Layer 1 when Idempotent. It runs
	// after the credential (unless Public) is checked and every path
	// parameter is read (pathParams): c carries the caller's tenant and
	// the parameters' values.
	serve func(h *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error)
	// workHeaders names request headers that change what the route does
	// when sent (createRun's OpenWOP-Dedup): each one a request sends
	// joins its Layer-1 request fingerprint (workParams), so the same key
	// with and without it, or with another value, is 409
	// idempotency_key_mismatch, never one request answered by the other's
	// replay. A request that sends none has the fingerprint it had without
	// this field.
	workHeaders []string
	// object, when set, loads the object a key's first execution on this
	// route created (idem.Request.Object): a policy whose replays render
	// the object (idem.ReplayObject) answers it as it is now.
	object func(h *Handler, ctx context.Context, c call, first idem.ClaimInfo, stored *idem.Response) (idem.ObjectState, error)
}

// GatewayPath is the path template.yaml declares for r: Gateway, or
// Pattern when that is empty.
func (r Route) GatewayPath() string {
	if r.Gateway != "" {
		return r.Gateway
	}
	return r.Pattern
}

// call is one authenticated request as a route's serve function sees it.
type call struct {
	ev     events.APIGatewayV2HTTPRequest
	tenant string // the credential's tenant ("" on a public route)
	// params holds each path parameter's value, by the name the pattern
	// gives it (pathParams says how a value is read).
	params map[string]string
	// create and fork are the body as the route's precheck read it (nil
	// where it did not, or refused it: serve reads it again).
	create *createBody
	fork   *forkRequest
}

// runID is the decoded {runId}, bound to the caller's tenant ("" when the
// route has none).
func (c call) runID() string { return c.params[paramRunID] }

// entryID is the {id} of an inbox route ("" when none; never a runId).
func (c call) entryID() string { return c.params[paramEntryID] }

// Routes is the run API. Adding a route is one row here (with its serve
// method) plus its HttpApi event in template.yaml (at its GatewayPath), which
// TestRoutesMatchTemplate requires, its operation in openapi.json, which
// TestOpenAPIDocumentIsTheRouteTable requires, and a test of the handler; a new
// {param} name in its pattern reaches serve as c.params[name] with no other
// edit (pathParams reads it as one raw segment unless it lists the name).
var Routes = []Route{
	{Method: http.MethodPost, Pattern: "/runs", Op: "createRun", Idempotent: true, mints: true, check: checkCreate, precheck: (*Handler).precheckCreate, jsonBody: true, serve: (*Handler).createRun, object: (*Handler).runObject,
		workHeaders: []string{HeaderDedup}},
	{Method: http.MethodGet, Pattern: "/runs/{runId}", Op: "getRun", serve: (*Handler).getRun},
	// HEAD is authorised exactly like GET: every non-public GET route has a
	// HEAD route of its own here and in template.yaml.
	{Method: http.MethodHead, Pattern: "/runs/{runId}", Op: "getRun", serve: (*Handler).getRun},
	// The body is optional and does not steer the cancel, but Layer 1
	// digests it: it is bounded as createRun's and, when present, is the
	// operation's schema, a JSON object with an optional string reason
	// (checkCancelBody).
	{Method: http.MethodPost, Pattern: "/runs/{runId}/cancel", Op: "cancelRun", Idempotent: true, check: checkCancelBody, jsonBody: true, serve: (*Handler).cancelRun},
	// Many cancels in one request (bulkcancel.go): each id answered as
	// cancelRun answers it, in one entry of a 200, under the request's own
	// key. A literal segment: API Gateway declares it as it is.
	{Method: http.MethodPost, Pattern: "/runs:bulk-cancel", Op: "bulkCancelRuns", Idempotent: true, check: checkBulkCancelBody, jsonBody: true, serve: (*Handler).bulkCancelRuns},
	// A new run of a failed run's workflow and inputs, linked by on (alias retryOf),
	// under the retry request's own key; a fork's retry is a fork of the
	// same source, point and mode (runs.NewRetry).
	{Method: http.MethodPost, Pattern: "/runs/{runId}/retry", Op: "retryRun", Idempotent: true, mints: true, noBody: true, serve: (*Handler).retryRun, object: (*Handler).runObject},
	// The caller's inbox of offline writes refused as decided against a
	// stale version (inbox.go).
	{Method: http.MethodGet, Pattern: "/inbox", Op: "listInbox", serve: (*Handler).listInbox},
	{Method: http.MethodHead, Pattern: "/inbox", Op: "listInbox", serve: (*Handler).listInbox},
	{Method: http.MethodPost, Pattern: "/inbox/{id}/resubmit", Op: "resubmitInboxEntry", Idempotent: true, noBody: true, serve: (*Handler).resubmitInboxEntry},
	{Method: http.MethodPost, Pattern: "/inbox/{id}/discard", Op: "discardInboxEntry", Idempotent: true, noBody: true, serve: (*Handler).discardInboxEntry},
	{Method: http.MethodGet, Pattern: "/runs/{runId}/effects", Op: "getRunEffects", serve: (*Handler).effects},
	{Method: http.MethodHead, Pattern: "/runs/{runId}/effects", Op: "getRunEffects", serve: (*Handler).effects},
	{Method: http.MethodGet, Pattern: "/runs/{runId}/events", Op: "streamRunEvents", serve: (*Handler).events},
	{Method: http.MethodHead, Pattern: "/runs/{runId}/events", Op: "streamRunEvents", serve: (*Handler).events},
	{Method: http.MethodGet, Pattern: "/runs/{runId}/events/poll", Op: "pollRunEvents", serve: (*Handler).pollEvents},
	{Method: http.MethodHead, Pattern: "/runs/{runId}/events/poll", Op: "pollRunEvents", serve: (*Handler).pollEvents},
	// Replay and fork (fork.go): a new run from the source's event log,
	// under the fork request's own key.
	{Method: http.MethodPost, Pattern: "/runs/{runId}:fork", Gateway: "/runs/{runId}", Op: "forkRun", Idempotent: true, mints: true, check: checkBody, precheck: (*Handler).precheckFork, jsonBody: true, serve: (*Handler).forkRun},
	// Pause and resume (pause.go): a run's status moved paused and back
	// to running, under Layer 1 as cancelRun. Declared "/runs/{runId}" in
	// template.yaml, as forkRun.
	{Method: http.MethodPost, Pattern: "/runs/{runId}:pause", Gateway: "/runs/{runId}", Op: OpPauseRun, Idempotent: true, check: checkPauseBody, jsonBody: true, serve: (*Handler).pauseRun},
	{Method: http.MethodPost, Pattern: "/runs/{runId}:resume", Gateway: "/runs/{runId}", Op: OpResumeRun, Idempotent: true, check: checkResumeBody, jsonBody: true, serve: (*Handler).resumeRun},
	{Method: http.MethodGet, Pattern: "/host/effect-seams", Op: "getEffectSeamManifest", serve: (*Handler).effectSeams},
	{Method: http.MethodHead, Pattern: "/host/effect-seams", Op: "getEffectSeamManifest", serve: (*Handler).effectSeams},
	{Method: http.MethodGet, Pattern: "/.well-known/openwop", Op: "getCapabilities", Public: true, serve: (*Handler).capabilities},
	// This host's own OpenAPI 3.1 document (openapi.go): the operations of
	// this table.
	{Method: http.MethodGet, Pattern: "/openapi.json", Op: "getOpenApiSpec", Public: true, serve: (*Handler).openAPI},
	// The ERP policy's live work-order route, under Layer 1 with the
	// work-order contract (workorder.go).
	{Method: http.MethodPost, Pattern: LiveWorkOrderPath, Op: OpLiveWorkOrder, Idempotent: true, check: checkBodySize, serve: (*Handler).liveWorkOrder},
	// The ERP policy's public format-validation route: no credential, no
	// Idempotency-Key, no idempotency record (workorder.go).
	{Method: http.MethodPost, Pattern: TestWorkOrderPath, Op: OpTestWorkOrder, Public: true, check: checkBodySize, serve: (*Handler).testWorkOrder},
}

// The path parameters that are more than one raw segment.
const (
	paramRunID   = "runId"
	paramEntryID = "id"
)

// pathParam reads a path parameter from its raw segments (two for a split
// runId) and the caller's tenant: value is what serve gets, scope what the
// parameter contributes to the Layer-1 request fingerprint
// (idem.Request.Params); e, when
// not nil, is the answer and nothing is served.
type pathParam func(segs []string, tenant string) (value, scope string, e *apierr.Error)

// pathParams says how a parameter named in a pattern is read, by name. A
// name not listed is one raw (still percent-encoded) segment, its own
// value and scope (rawParam), so a route with a new parameter needs no
// entry here unless the value has a grammar to check.
var pathParams = map[string]pathParam{
	// A runId is decoded (~2F or %2F projections, or its split form) and
	// must be bound to the caller's tenant: another tenant's run is 403
	// before any read. Its scope is its canonical projection.
	paramRunID: func(segs []string, tenant string) (string, string, *apierr.Error) {
		runID, err := runs.DecodePathID(segs...)
		if err != nil {
			return "", "", apierr.New(http.StatusBadRequest, apierr.CodeValidation, "runId is not a tenant-bound <tenantId>/<opaque> id (project it as ~2F or %%2F)").
				WithDetails(map[string]any{"field": "runId"})
		}
		if runs.RunTenant(runID) != tenant {
			return "", "", apierr.New(http.StatusForbidden, apierr.CodeIDTenantMismatch, "the runId's tenant segment is not the caller's tenant")
		}
		return runID, runs.ProjectID(runID), nil
	},
	// An inbox entry id is one segment of inbox.EntryID's shape; any other
	// names no entry.
	paramEntryID: func(segs []string, _ string) (string, string, *apierr.Error) {
		if len(segs) != 1 || !inbox.ValidEntryID(segs[0]) {
			return "", "", notFoundErr()
		}
		return segs[0], segs[0], nil
	},
}

// rawParam reads a parameter pathParams does not list: exactly one raw
// segment.
func rawParam(segs []string, _ string) (string, string, *apierr.Error) {
	if len(segs) != 1 {
		return "", "", notFoundErr()
	}
	return segs[0], segs[0], nil
}

// readParams reads every path parameter of the matched route, in pattern
// order, so the first refused one (left to right) is the answer. scope
// holds each one's contribution to the Layer-1 request fingerprint.
func readParams(pattern string, segs map[string][]string, tenant string) (params, scope map[string]string, e *apierr.Error) {
	if len(segs) == 0 {
		return nil, nil, nil
	}
	params, scope = make(map[string]string, len(segs)), make(map[string]string, len(segs))
	for _, s := range strings.Split(pattern, "/") {
		name, ok := paramName(s)
		if !ok {
			continue
		}
		read, listed := pathParams[name]
		if !listed {
			read = rawParam
		}
		v, sc, e := read(segs[name], tenant)
		if e != nil {
			return nil, nil, e
		}
		params[name], scope[name] = v, sc
	}
	return params, scope, nil
}

// Scope is the Layer-1 operation of an idempotent route: the method and the
// pattern, the route template ("POST /runs/{runId}/cancel"), as the library
// scopes a routed request. Its path parameters are not in the operation but
// in the request fingerprint (idem.Request.Params, each parameter's
// canonical value), so one key is one record per route: reused on another
// run's cancel it is 409 idempotency_key_mismatch, never a second
// execution. createRun's is "POST /runs" (OpCreateRun).
func (r Route) Scope() string { return r.Method + " " + r.Pattern }

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
	public, head := false, false
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
		if r.Method == http.MethodHead {
			head = true
		} else {
			methods = append(methods, r.Method)
		}
	}
	if !found && method == http.MethodHead && get != nil {
		m.Route, found = *get, true
	}
	// HEAD is advertised where it is served to every caller who may GET:
	// a route of its own (every authenticated GET route has one, which
	// template.yaml routes through the authorizer) or a public GET.
	if head || (public && get != nil) {
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
	name, _, ok := paramSuffix(seg)
	return name, ok
}

// paramSuffix splits a parameter segment into its name and the literal
// that follows it in the same segment ("{runId}:fork": "runId", ":fork";
// the OpenWOP custom-method form).
func paramSuffix(seg string) (name, suffix string, ok bool) {
	end := strings.IndexByte(seg, '}')
	if len(seg) > 2 && seg[0] == '{' && end > 1 {
		return seg[1:end], seg[end+1:], true
	}
	return "", "", false
}

// matchPattern matches path segments against a pattern: literals exactly,
// a parameter one segment, or two when the path has one segment more than
// the pattern (and the pattern has one parameter); its first segment is
// never empty, nor, of two, a whole runId by itself (wholeRunID).
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
		name, suffix, isParam := paramSuffix(s)
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
		got := append([]string(nil), segs[i:i+take]...)
		if take == 2 && wholeRunID(got[0]) {
			// The split form carries a runId's tenant in its first
			// segment; a first segment that is a whole runId on its own
			// ("acme~2Fr1/annotations") names a sub-resource of that run
			// this host does not serve: no route.
			return nil, false
		}
		last := got[len(got)-1]
		if suffix != "" {
			// A parameter with a literal suffix: the last segment ends
			// with it, and what precedes it is the (last part of the)
			// value.
			if len(last) <= len(suffix) || !strings.HasSuffix(last, suffix) {
				return nil, false
			}
			got[len(got)-1] = strings.TrimSuffix(last, suffix)
		} else if hasColon(last, take == 1) && hasSuffixedRoute(pat, s) {
			return nil, false
		}
		params[name] = got
		i += take
	}
	return params, true
}

// hasColon reports whether seg, the last segment of a parameter's value,
// holds a ":" that could start a route suffix. When seg is the whole value
// (whole), an "anon:" at its start is an anonymous tenant's prefix (the
// tenantId grammar), not a suffix: "anon:s%2Fr1" is a runId, "anon:s%2Fr1:fork"
// the fork route.
func hasColon(seg string, whole bool) bool {
	if whole {
		seg = strings.TrimPrefix(seg, "anon:")
	}
	return strings.Contains(seg, ":")
}

// hasSuffixedRoute reports whether a route's pattern shaped like pat puts
// a literal suffix after the parameter segment s (so "/runs/x:fork" is the
// fork route, never getRun of a runId "x:fork").
func hasSuffixedRoute(pat []string, s string) bool {
	for _, r := range Routes {
		rp := strings.Split(strings.TrimPrefix(r.Pattern, "/"), "/")
		if len(rp) != len(pat) {
			continue
		}
		for i := range rp {
			if pat[i] == s {
				if _, suffix, ok := paramSuffix(rp[i]); ok && suffix != "" {
					return true
				}
			}
		}
	}
	return false
}

// wholeRunID reports whether one raw path segment is, by itself, a complete
// tenant-bound runId (projected with ~2F or %2F).
func wholeRunID(seg string) bool {
	_, err := runs.DecodePathID(seg)
	return err == nil
}

// workParamPrefix starts the fingerprint parameter of a work header
// (Route.workHeaders): no path parameter's name has it.
const workParamPrefix = "header:"

// workParams adds to scope (the path parameters' part of the request
// fingerprint, possibly nil) each of the route's work headers the request
// sends, under workParamPrefix and the header's name: its values trimmed
// of surrounding whitespace (as the route reads them), sorted, joined by
// commas. It returns scope, or a new map when scope was nil and a header
// was sent.
func (r Route) workParams(ev events.APIGatewayV2HTTPRequest, scope map[string]string) map[string]string {
	for _, name := range r.workHeaders {
		vs := header.Values(ev.Headers, name)
		if len(vs) == 0 {
			continue
		}
		trimmed := make([]string, len(vs))
		for i, v := range vs {
			trimmed[i] = strings.TrimSpace(v)
		}
		sort.Strings(trimmed)
		if scope == nil {
			scope = make(map[string]string, len(r.workHeaders))
		}
		scope[workParamPrefix+name] = strings.Join(trimmed, ",")
	}
	return scope
}
