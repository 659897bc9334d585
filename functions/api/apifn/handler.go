// Package apifn is the api function's handler: the OpenWOP-style run API
// behind an API Gateway HTTP API (payload format 2.0), with Layer 1 (idem)
// wrapping every mutating route and the Layer-2 witness at
// GET /runs/{runId}/effects. functions/api/main.go wires it for Lambda and
// `idemkit dev` serves it over net/http.
//
// Routes: the table Routes (routes.go) lists them: POST /runs (createRun),
// GET /runs/{runId} (getRun), POST /runs/{runId}/cancel (cancelRun), POST
// /runs:bulk-cancel (bulkCancelRuns), POST /runs/{runId}/retry
// (retryRun), GET /runs/{runId}/effects (getRunEffects), GET
// /runs/{runId}/events (streamRunEvents), the caller's inbox GET /inbox
// (listInbox), POST /inbox/{id}/resubmit (resubmitInboxEntry) and POST
// /inbox/{id}/discard (discardInboxEntry),
// GET /.well-known/openwop (getCapabilities, no credential), GET
// /openapi.json (getOpenApiSpec, no credential: this host's own OpenAPI
// 3.1 document, openapi.go) and POST
// /api/v1/inbound/work-orders/test (the ERP policy's format-validation
// route: no credential, no Idempotency-Key, never an idempotency record).
// A request whose OpenWOP-Version names a major this host does not
// serve is 406 protocol_version_unsupported on every route, before
// anything else (VersionRefusal). Any other path is
// 404 not_found, as is an operation of the OpenWOP run surface this host
// does not advertise (GET /runs, listRuns; unadvertisedOps; with Layer 1
// off, every method on /runs/{runId}/effects, getRunEffects being gated on
// the idempotency family discovery then omits), and a known
// path with another method is 405 (vendor code
// idemkit.method_not_allowed, the registry has no 405 row) with an Allow
// header; methods are case-sensitive, so `post /runs` is 405 too, before
// any credential (MethodCaseRefusal). Errors use the envelope {error,
// message, details?}.
//
// Events: API Gateway HTTP APIs buffer a Lambda's whole response, so GET
// /runs/{runId}/events serves a snapshot of the run's events (RunEvents) as
// text/event-stream and closes the stream after the current state; a client
// re-polls with Last-Event-ID (the last `id:` it saw) for what came later,
// as an EventSource does by itself. See RunEvents for what the log holds.
//
// Tenancy: the tenant comes only from the authorizer context (idem's
// TenantSource, key "tenantId"). A path runId is accepted `~`-projected
// (`acme~2Fr…`) or `%2F`-encoded; a runId whose tenant segment is not the
// caller's is 403 id_tenant_mismatch before any read, so another tenant's
// run is never loaded, let alone returned.
package apifn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/ids"
	"github.com/idemkit/idemkit/internal/jsonerr"
	"github.com/idemkit/idemkit/internal/keyhash"
	"github.com/idemkit/idemkit/ledger"
)

// CodeMethodNotAllowed is the vendor error code of a 405 (the OpenWOP
// registry has no 405 row; vendor codes match its vendorCodePattern).
const CodeMethodNotAllowed = "idemkit.method_not_allowed"

// MaxBodyBytes bounds the bodies of createRun, cancelRun and
// bulkCancelRuns (413 payload_too_large above), checked before Layer 1
// reads them.
const MaxBodyBytes = 256 << 10

// OpCreateRun is createRun's Layer-1 operation (its Route.Scope), the
// operation its idempotency records are scoped by.
const OpCreateRun = "POST /runs"

// Config configures a Handler.
type Config struct {
	// Runs stores runs. Required.
	Runs runs.RunStore
	// Guard is Layer 1, wrapping createRun and cancelRun. Required.
	Guard *idem.Guard
	// Ledger serves the effects witness. Required.
	Ledger *ledger.Ledger
	// Webhook is the webhook workflow's destination policy, checked at
	// createRun. Default: the zero WebhookPolicy (public hosts only).
	Webhook webhook.WebhookPolicy
	// CrossRegion is the advertised posture. Default "single-region".
	CrossRegion string
	// ReplicationLagBoundMs is the declared replication lag bound advertised
	// as multiRegion.replicationLagBoundMs (fenced-effects only), 0..60000.
	// Default 0: settings.DefaultReplicationLagBoundMs, unless
	// ReplicationLagBoundDeclared.
	ReplicationLagBoundMs int
	// ReplicationLagBoundDeclared makes ReplicationLagBoundMs the declared
	// bound even when it is 0 (REPLICATION_LAG_BOUND_MS=0, which the
	// template allows): ConfigFromKit sets it, so the api function
	// advertises the deployment's bound exactly, never the default in its
	// place.
	ReplicationLagBoundDeclared bool
	// BaseURL prefixes eventsUrl/statusUrl. Default "https://" + the
	// request's domain name.
	BaseURL string
	// Logger receives error logs. Default slog.Default().
	Logger *slog.Logger
	// Inbox keeps the offline writes refused as decided against a stale
	// version (GET /inbox, POST /inbox/{id}/resubmit and /discard).
	// Default: beside the runs (the RunsTable inbox, inbox.Dynamo, of a
	// *runs.DynamoRuns), else an in-memory one (inbox.Mem), each with
	// inbox.DefaultRetention.
	Inbox inbox.Store
	// ForkRetention is how long after its creation a run can be forked;
	// an older source is refused 422 fork_point_invalid. Default
	// DefaultForkRetention (the ledger's minimum retention, 14 days).
	ForkRetention time.Duration
	// PollMaxWait is the longest a pollRunEvents request waits for an
	// event when its log has none after the cursor and the run is live,
	// whatever its timeout asks; the request's deadline, less 2 s, bounds
	// it too. Each wait re-reads the run with a backoff (250 ms, 500 ms,
	// 1 s, then every 2 s): a wait of 20 s is at most 14 reads, the first
	// included. Default DefaultPollMaxWait (20 s); negative: never wait.
	// The api function sets it from POLL_MAX_WAIT_SECONDS (ConfigFromKit).
	PollMaxWait time.Duration
	// ReplayFixtures advertises the graph fixtures with a side-effecting
	// node (settings.WithReplayFixtures): set only where the executor has a
	// fixture destination for them (`idemkit dev`). Default false.
	ReplayFixtures bool
	// Build identifies this build in the effect-seam manifest
	// (host.build, kind "commit"). Default: the binary's VCS revision,
	// else "unknown".
	Build string
	// Test holds the hooks only tests and `idemkit dev` set. Default zero.
	Test TestConfig
}

// TestConfig holds a Handler's hooks for tests and development; the api
// function of the deployed stack leaves it zero.
type TestConfig struct {
	// Clock is the Handler's clock: run and inbox times (Now) and
	// conformance-delay's pause (Sleep). Read once, by New. Default the
	// system clock. (The Guard and the ledger keep their own clocks.)
	Clock ledger.Clock
	// Hold, when set, is called by createRun under the Layer-1 claim of its
	// Idempotency-Key, before the run is created, and holds the answer as
	// long as it blocks: `idemkit dev --conformance-seams`'s idempotency
	// hold seam, which keeps a same-key create in flight for as long as a
	// test needs (never a sleep race). Default nil: no hold.
	Hold func(ctx context.Context, tenant, key string) error
	// ConformanceSeams advertises the conformance seams profile
	// (conformance.seamsProfile) in the capabilities document. Set only by
	// `idemkit dev --conformance-seams`, which serves the seams; the api
	// function of the deployed stack never sets it (it has no environment
	// variable), so the stack neither serves nor advertises them.
	ConformanceSeams bool
	// BaseURLOf, when set, is the base URL of a request's links (Location,
	// statusUrl, eventsUrl, effectsUrl) in place of BaseURL; "" keeps
	// BaseURL. `idemkit dev` sets it so that a request made to
	// http://localhost:PORT gets links under that origin (runs.md
	// §Response); the deployed api function never sets it, and never
	// builds links from a Host header.
	BaseURLOf func(ev events.APIGatewayV2HTTPRequest) string
	// PollWaitEnds, when closed, ends the wait of every pollRunEvents
	// request: a poll waiting for an event answers at once what it read
	// (200, no events), as when its wait runs out, and a later poll does
	// not wait. `idemkit dev` closes it when it stops, so a stop neither
	// waits out its grace for a waiting long poll nor cuts it without an
	// answer (the deployed api function never stops mid-request). Default
	// nil: never.
	PollWaitEnds <-chan struct{}
}

// Handler serves the API. Safe for concurrent use.
type Handler struct {
	cfg    Config
	clock  ledger.Clock
	caps   []byte
	seams  []byte
	tenant idem.TenantSource
	marks  requestIDMarks
	// guardedHeaders says the Guard's policy adds headers to a first
	// answer (the ERP policy's): no route's precheck answers before the
	// claim, whose answer would lack them (precheckable).
	guardedHeaders bool
	// guard is the Guard's Config, read once by New (layer1,
	// bodyTenantRefusal).
	guard idem.Config
}

// ErrConfig is matched (errors.Is) by every error New returns: one error
// listing every problem of the Config.
var ErrConfig = errors.New("apifn: invalid config")

// New validates cfg and returns a Handler, or an error listing every
// problem of cfg (matching ErrConfig).
func New(cfg Config) (*Handler, error) {
	var p configerr.List
	if cfg.Runs == nil {
		p.Addf("Config.Runs is required")
	}
	if cfg.Guard == nil {
		p.Addf("Config.Guard is required")
	}
	if cfg.Ledger == nil {
		p.Addf("Config.Ledger is required")
	}
	if err := p.Err("apifn", ErrConfig); err != nil {
		return nil, err
	}
	if gc := cfg.Guard.Config(); !gc.Tenant.IsSet() && !gc.Disabled && gc.Unauthenticated != idem.AnonymousTenant {
		return nil, errors.New("apifn: the Guard needs Config.Tenant (the authorizer context's tenant)")
	}
	if cfg.CrossRegion == "" {
		cfg.CrossRegion = settings.CrossRegionSingle
	}
	// Discovery names the policy Layer 1 actually runs.
	capOpts := []settings.CapabilityOption{settings.WithIdempotencyPolicy(cfg.Guard.Config().Policy.Name)}
	if cfg.ReplicationLagBoundMs > 0 || cfg.ReplicationLagBoundDeclared {
		capOpts = append(capOpts, settings.WithReplicationLagBound(cfg.ReplicationLagBoundMs))
	}
	if cfg.Test.ConformanceSeams {
		capOpts = append(capOpts, settings.WithConformanceSeams())
	}
	if cfg.Guard.Config().Disabled {
		// Layer 1 off: the idempotency family is not advertised, and
		// getRunEffects, gated on it, is answered as unadvertised.
		capOpts = append(capOpts, settings.WithLayer1Off())
	}
	if cfg.ReplayFixtures {
		capOpts = append(capOpts, settings.WithReplayFixtures())
	}
	caps, err := settings.CapabilitiesDoc(cfg.CrossRegion, capOpts...)
	if err != nil {
		return nil, err
	}
	clk := cfg.Test.Clock
	if clk == nil {
		clk = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Inbox == nil {
		if cfg.Inbox, err = defaultInbox(cfg.Runs); err != nil {
			return nil, err
		}
	}
	seams, err := settings.EffectSeamManifest(cfg.Build)
	if err != nil {
		return nil, err
	}
	gc := cfg.Guard.Config()
	return &Handler{cfg: cfg, clock: clk, caps: caps, seams: seams, tenant: gc.Tenant,
		marks: marksOf(gc.Policy.RequestIDHeader, gc.Policy.RequestIDMember), guard: gc,
		guardedHeaders: addsHeaders(gc.Policy)}, nil
}

// Handle is the Lambda handler (events.APIGatewayV2HTTPRequest in and out).
// It never returns an error: failures are envelopes. Every 401 carries
// WWW-Authenticate, and a HEAD request's answer has no content (RFC 9110
// §11.6.1, §9.3.2).
func (h *Handler) Handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	resp, layer1, err := h.route(ctx, ev)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// The caller hung up (its context cancelled, not timed out): not
		// an internal error, nor the store's.
		h.cfg.Logger.InfoContext(ctx, "api: the client closed the request", slog.String("request_id", ev.RequestContext.RequestID))
		resp, err = errResp(apierr.New(idem.StatusClientClosed, idem.CodeClientClosed,
			"The client closed the request before it was answered; retry it with the same Idempotency-Key.")), nil
	}
	if err != nil && ownDeadline(ctx, err) {
		h.cfg.Logger.WarnContext(ctx, "api: the request outlived its deadline", keyhash.ErrAttr(err), slog.String("request_id", ev.RequestContext.RequestID))
		resp, err = h.stamp(h.deadlineExceeded(keyed(ev)), ev.RequestContext.RequestID), nil
	}
	if err != nil {
		h.cfg.Logger.ErrorContext(ctx, "api: internal error", keyhash.ErrAttr(err), slog.String("request_id", ev.RequestContext.RequestID))
		resp = errResp(apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
	}
	if !layer1 || err != nil {
		// An answer Layer 1 built carries the request id already.
		resp = h.stamp(resp, ev.RequestContext.RequestID)
	}
	if resp.Headers == nil {
		resp.Headers = map[string]string{}
	}
	resp.Headers["OpenWOP-Version"] = settings.ProtocolVersion
	if resp.StatusCode == http.StatusUnauthorized && header.First(resp.Headers, "WWW-Authenticate") == "" {
		// Every 401 names the scheme to use (RFC 9110 §11.6.1), Layer
		// 1's too (a credential without the parts the policy scopes a
		// key by), which knows no scheme of this host.
		resp.Headers["WWW-Authenticate"] = wwwAuthenticate
	}
	if ev.RequestContext.HTTP.Method == http.MethodHead {
		// A HEAD answer is GET's status and header fields without the
		// content (RFC 9110 §9.3.2: a server MUST NOT send content in
		// the response to HEAD), refusals included.
		resp.Body, resp.IsBase64Encoded = "", false
	}
	return resp, nil
}

func errResp(e *apierr.Error) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: e.Status, Headers: e.Headers(), Body: string(e.Body())}
}

// wwwAuthenticate is the challenge of every 401: HTTP requires a 401 to
// name the scheme the client must use (RFC 9110 §11.6.1), here an API key
// as a bearer token (Authorization: Bearer <key>).
const wwwAuthenticate = `Bearer realm="idemkit"`

// unauthenticated is the answer to a request without a valid credential:
// 401 unauthenticated (Handle adds the WWW-Authenticate challenge, as to
// every 401).
func unauthenticated() events.APIGatewayV2HTTPResponse {
	return errResp(apierr.New(http.StatusUnauthorized, apierr.CodeUnauthenticated, "a valid API key is required"))
}

func jsonResp(status int, v any) (events.APIGatewayV2HTTPResponse, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b)}, nil
}

func notAllowed(allow string) events.APIGatewayV2HTTPResponse {
	r := errResp(apierr.New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed; allowed: %s", allow))
	r.Headers["Allow"] = allow
	return r
}

// MethodCaseRefusal is the 405 of a request whose method is not in upper
// case on a known path, and allow its Allow header: methods are
// case-sensitive (RFC 9110 section 9.1), so `post /runs` is no route's
// method, and it is answered as such before any credential is checked
// (never a credential error for a valid credential) and without running
// anything. nil for an upper-case method or an unknown path (404).
func MethodCaseRefusal(method, rawPath string) (e *apierr.Error, allow string) {
	if method == strings.ToUpper(method) {
		return nil, ""
	}
	_, allow, _, ok := MatchRoute(strings.ToUpper(method), rawPath)
	if !ok {
		return nil, ""
	}
	return apierr.New(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed (methods are case-sensitive); allowed: %s", allow), allow
}

func notFound() events.APIGatewayV2HTTPResponse { return errResp(notFoundErr()) }

func notFoundErr() *apierr.Error {
	return apierr.New(http.StatusNotFound, apierr.CodeNotFound, "not found")
}

// route dispatches on the raw path (still percent-encoded, so `%2F` inside a
// runId is not a separator) and the method, through Routes. layer1 says
// that Layer 1 built the answer (dispatch).
func (h *Handler) route(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (_ events.APIGatewayV2HTTPResponse, layer1 bool, _ error) {
	if e := versionRefusal(ev.Headers); e != nil {
		return errResp(e), false, nil
	}
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	method := ev.RequestContext.HTTP.Method
	if e, allow := MethodCaseRefusal(method, path); e != nil {
		r := errResp(e)
		r.Headers["Allow"] = allow
		return r, false, nil
	}
	m, allow, found, ok := MatchRoute(method, path)
	switch {
	case !ok, !found && unadvertised(method, path), h.guard.Disabled && gatedOnIdempotency(path):
		return notFound(), false, nil
	case !found:
		return notAllowed(allow), false, nil
	}
	tenant := ""
	if !m.Route.Public {
		var ok bool
		if tenant, ok = h.authed(ev); !ok {
			return unauthenticated(), false, nil
		}
	}
	params, scope, e := readParams(m.Route.Pattern, m.Params, tenant)
	if e != nil {
		return errResp(e), false, nil
	}
	return h.dispatch(ctx, m.Route, call{ev: ev, tenant: tenant, params: params}, scope)
}

// dispatch serves a matched, authenticated (unless public) request whose
// path parameters are read. An idempotent route runs under Layer 1 with its
// operation passed explicitly (Route.Scope, the route template) and the
// parameters' canonical values as its path parameters (in the request
// fingerprint); the event itself is never rewritten. layer1 says that
// Layer 1 built the answer: it ran the request under the protocol, or
// answered it without the handler (a replay, a conflict, an invalid key).
// An answer of the handler that ran outside a claim (a disabled Guard, a
// skipped route, no key) is the host's, as is every other route's.
func (h *Handler) dispatch(ctx context.Context, r Route, c call, scope map[string]string) (_ events.APIGatewayV2HTTPResponse, layer1 bool, _ error) {
	if r.mints && !ids.MintableTenant(c.tenant) {
		return errResp(mintRefusal()), false, nil
	}
	check := r.check
	if r.noBody {
		check = checkNoBody
	}
	if check != nil {
		if e := contentCodingRefusal(c.ev); e != nil {
			resp := errResp(e)
			resp.Headers["Accept-Encoding"] = "identity"
			return resp, false, nil
		}
		if e := check(c.ev); e != nil {
			return errResp(e), false, nil
		}
	}
	if r.jsonBody {
		if e := h.jsonBodyRefusal(r, c); e != nil {
			return errResp(e), false, nil
		}
	}
	if r.jsonBody || r.noBody {
		if e := h.bodyTenantRefusal(r, c); e != nil {
			return errResp(e), false, nil
		}
	}
	if r.precheck != nil && h.precheckable(r, c) {
		if e := r.precheck(h, &c); e != nil {
			if h.unrecorded(e) {
				return errResp(e), false, nil
			}
			c.create, c.fork = nil, nil
		}
	}
	if !r.Idempotent {
		resp, err := h.serve(ctx, r, c)
		return resp, false, err
	}
	req := idem.Request{Event: c.ev, Operation: r.Scope(), Params: r.workParams(c.ev, scope)}
	if r.object != nil {
		req.Object = func(ctx context.Context, first idem.ClaimInfo, stored *idem.Response) (idem.ObjectState, error) {
			return r.object(h, ctx, c, first, stored)
		}
	}
	var unclaimed, timedOut atomic.Bool
	resp, err := h.cfg.Guard.Do(ctx, req, func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
		if _, claimed := idem.FromContext(ctx); !claimed {
			unclaimed.Store(true)
		}
		resp, err := h.serve(ctx, r, c)
		if err != nil && ownDeadline(ctx, err) {
			timedOut.Store(true)
		}
		return resp, err
	})
	if err == nil && timedOut.Load() && resp.StatusCode == http.StatusInternalServerError {
		// Layer 1 answered the handler's error its retryable 500 and
		// recorded nothing; the error was the request's own deadline, so
		// the answer says so (deadlineExceeded), under every policy.
		h.cfg.Logger.WarnContext(ctx, "api: the request outlived its deadline", slog.String("request_id", c.ev.RequestContext.RequestID))
		return h.deadlineExceeded(keyed(c.ev)), false, nil
	}
	if err == nil && r.mints {
		resp = onOrigin(resp, h.baseURL(c.ev))
	}
	return resp, !unclaimed.Load(), err
}

// onOrigin puts the links of a run-minting route's 201 (createRun,
// retryRun, forkRun: Location and the body's statusUrl and eventsUrl)
// under base, the origin this request was made to (runs.md §Response:
// they resolve under the request's origin). A first answer already has
// them there, unchanged; a replay of a key whose first request went to
// another domain of the same API (API Gateway's own and a custom domain)
// is its recorded answer with only those links moved, the same run.
// Any other answer, or a body that names no runId, is returned as it is.
func onOrigin(resp events.APIGatewayV2HTTPResponse, base string) events.APIGatewayV2HTTPResponse {
	if resp.StatusCode != http.StatusCreated || resp.IsBase64Encoded {
		return resp
	}
	var m map[string]json.RawMessage
	var id string
	if json.Unmarshal([]byte(resp.Body), &m) != nil || json.Unmarshal(m["runId"], &id) != nil || id == "" {
		return resp
	}
	run := base + "/runs/" + runs.ProjectID(id)
	moved := false
	for name, want := range map[string]string{"statusUrl": run, "eventsUrl": run + "/events"} {
		var got string
		if raw, ok := m[name]; !ok || json.Unmarshal(raw, &got) != nil || got == want {
			continue
		}
		m[name], _ = json.Marshal(want) // a string: never an error
		moved = true
	}
	if moved {
		b, err := json.Marshal(m)
		if err != nil {
			return resp
		}
		resp.Body = string(b)
	}
	for k, v := range resp.Headers {
		if strings.EqualFold(k, "Location") && v != run {
			hs := make(map[string]string, len(resp.Headers))
			for k2, v2 := range resp.Headers {
				hs[k2] = v2
			}
			hs[k] = run
			resp.Headers = hs
			break
		}
	}
	return resp
}

// capabilities serves the discovery document (GET /.well-known/openwop).
func (h *Handler) capabilities(_ context.Context, _ call) (events.APIGatewayV2HTTPResponse, error) {
	return publicDoc(h.caps), nil
}

// publicDoc is the 200 of a public, static JSON document of this host (the
// discovery document, the OpenAPI document): cacheable by anyone for five
// minutes, the same for every caller.
func publicDoc(body []byte) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Body: string(body),
		Headers: map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300"}}
}

// mintRefusal is the answer of a route that mints a runId (Route.mints)
// to a tenant holding a `~` (a credential issued before such tenants were
// refused): the OpenWOP id schema's path projection note forbids minting a
// tenant-bound id holding a `~`, so the host mints none for it, while the
// runs it has stay readable, cancellable and streamable in every id form.
// 403 forbidden, reason tenant_not_mintable, before Layer 1 claims the
// key: nothing is recorded, and a retry under a new credential runs.
func mintRefusal() *apierr.Error {
	return apierr.New(http.StatusForbidden, apierr.CodeForbidden,
		"The credential's tenant holds a '~', and a host must not mint a run id holding one; its runs stay readable. Issue a key for a tenant of "+ids.MintTenantChars+".").
		WithDetails(map[string]any{"reason": "tenant_not_mintable"})
}

// authed returns the authenticated tenant from the authorizer context.
func (h *Handler) authed(ev events.APIGatewayV2HTTPRequest) (string, bool) {
	t := h.tenant.TenantV2(&ev.RequestContext)
	return t, t != "" && runs.ValidTenant(t)
}

// eventBody is the event's body as sent: base64-decoded when API Gateway
// encoded it; a body that is not valid base64 is 400 validation_error.
func eventBody(ev events.APIGatewayV2HTTPRequest) ([]byte, *apierr.Error) {
	if !ev.IsBase64Encoded {
		return []byte(ev.Body), nil
	}
	b, err := base64.StdEncoding.DecodeString(ev.Body)
	if err != nil {
		return nil, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body is not valid base64")
	}
	return b, nil
}

// bodyLen is the decoded length of the event's body: for a base64 body,
// three bytes per four characters less its padding, so a body of exactly
// MaxBodyBytes is not refused for the "==" that ends its encoding (a body
// that is not valid base64 is refused by eventBody).
func bodyLen(ev events.APIGatewayV2HTTPRequest) int {
	if ev.IsBase64Encoded {
		n := len(ev.Body) / 4 * 3
		switch {
		case n == 0:
		case strings.HasSuffix(ev.Body, "=="):
			n -= 2
		case strings.HasSuffix(ev.Body, "="):
			n--
		}
		return n
	}
	return len(ev.Body)
}

func tooLarge() *apierr.Error {
	return apierr.New(http.StatusRequestEntityTooLarge, apierr.CodePayloadTooLarge, "the body exceeds %d bytes", MaxBodyBytes)
}

func checkBodySize(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if bodyLen(ev) > MaxBodyBytes {
		return tooLarge()
	}
	return nil
}

// checkNoBody is the check of a route that reads no body (retryRun, the
// inbox's resubmit and discard), before anything runs, with or without an
// Idempotency-Key: at most MaxBodyBytes and, when not empty, strict JSON
// text, as Layer 1 reads a keyed JSON body (jsonerr.Check: no member name
// twice, valid UTF-8 without a lone surrogate, numbers a double holds);
// 400 validation_error otherwise. A keyed request's body is part of what
// its key binds, so the same request is never accepted or refused for its
// key's presence, nor for its Content-Type; nor is a body naming another
// tenant (bodyTenantRefusal, Route.noBody).
func checkNoBody(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if e := checkBodySize(ev); e != nil {
		return e
	}
	body, e := eventBody(ev)
	if e != nil || len(body) == 0 {
		return e
	}
	return strictJSON(body)
}

// checkBody is the check of a route whose body the host parses as JSON
// (createRun, forkRun; cancelRun's when it has one): at most MaxBodyBytes,
// and of a JSON media type, if it names one, in UTF-8. (That the body is
// strict JSON is checked next, jsonBodyRefusal.)
func checkBody(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if bodyLen(ev) > MaxBodyBytes {
		return tooLarge()
	}
	if ct := header.First(ev.Headers, "Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || !(mt == "application/json" || strings.HasSuffix(mt, "+json")) {
			return apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType, "the body must be application/json")
		}
		// JSON is UTF-8 (RFC 8259 §8.1): a body declared in another
		// charset is refused rather than read as UTF-8.
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType, "the body must be UTF-8 JSON (charset=utf-8 or none)")
		}
	}
	return nil
}

// contentCodingRefusal is the 415 unsupported_media_type of a non-empty
// body sent with a content coding other than identity (gzip, br, ...):
// this host decodes none, so the body is refused for its coding (RFC 9110
// §15.5.16; the answer carries Accept-Encoding: identity, §12.5.3) rather
// than read as JSON and refused as invalid. It runs on every route that
// reads a body (a Route with a check), before the check.
func contentCodingRefusal(ev events.APIGatewayV2HTTPRequest) *apierr.Error {
	if bodyLen(ev) == 0 {
		return nil
	}
	for _, v := range header.Values(ev.Headers, "Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			coding = strings.Trim(coding, " \t")
			if coding != "" && !strings.EqualFold(coding, "identity") {
				return apierr.New(http.StatusUnsupportedMediaType, apierr.CodeUnsupportedMediaType,
					"Content-Encoding %q is not supported: send the body uncoded (identity)", coding)
			}
		}
	}
	return nil
}

func (h *Handler) baseURL(ev events.APIGatewayV2HTTPRequest) string {
	if h.cfg.Test.BaseURLOf != nil {
		if b := h.cfg.Test.BaseURLOf(ev); b != "" {
			return strings.TrimSuffix(b, "/")
		}
	}
	if h.cfg.BaseURL != "" {
		return strings.TrimSuffix(h.cfg.BaseURL, "/")
	}
	return "https://" + ev.RequestContext.DomainName
}

// bodyTenantRefusal is the 403 forbidden of a body that names, in the
// Guard's BodyTenantField (the deployed stack's "tenantId"), a tenant
// other than the caller's, as Layer 1 answers it: Layer 1 reads that
// member only of a body it reads as JSON (a JSON Content-Type), and a
// route whose serve reads its body as JSON whatever the Content-Type
// (Route.jsonBody), or that takes a body only as JSON text whatever the
// Content-Type (Route.noBody, checkNoBody), must not answer the same body
// otherwise without one.
// nil when the field is not configured, when Layer 1 decides (it reads
// the body as JSON, or refuses the request before reading it, layer1),
// or when the body is not a JSON object naming another tenant.
func (h *Handler) bodyTenantRefusal(r Route, c call) *apierr.Error {
	if l := h.layer1(r, c.ev); h.guard.BodyTenantField == "" || l.refuses || l.active && l.json {
		return nil
	}
	body, e := eventBody(c.ev)
	if e != nil {
		return nil
	}
	return h.otherTenant(c, body)
}

// otherTenant is bodyTenantRefusal's 403 for body, whoever reads it: nil
// when the field is not configured, or the body is not a JSON object
// naming another tenant than c's.
func (h *Handler) otherTenant(c call, body []byte) *apierr.Error {
	field := h.guard.BodyTenantField
	if field == "" || len(body) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	raw, ok := m[field]
	if !ok {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return nil
	}
	if s, isString := v.(string); isString && s == c.tenant {
		return nil
	}
	if n, isNumber := v.(float64); isNumber && strconv.FormatFloat(n, 'f', -1, 64) == c.tenant {
		return nil
	}
	if b, isBool := v.(bool); isBool && strconv.FormatBool(b) == c.tenant {
		return nil
	}
	return apierr.New(http.StatusForbidden, apierr.CodeForbidden,
		"The tenant in the request body is not the authenticated tenant.").
		WithDetails(map[string]any{"reason": "tenant_mismatch"})
}

// precheckable reports whether route r's precheck may answer c before
// Layer 1 does: not under a policy that adds headers to a guarded answer
// (the ERP policy: the refusal is answered under the claim, with them,
// as before), nor where Layer 1 refuses the request before reading its
// body (a key missing where required, or invalid), nor for a body that is
// not strict JSON text (Layer 1's refusal, or jsonBodyRefusal's, is its
// answer), nor for one naming another tenant (the 403 comes first, Layer
// 1's or bodyTenantRefusal's): those answers keep coming first.
func (h *Handler) precheckable(r Route, c call) bool {
	if h.guardedHeaders || h.layer1(r, c.ev).refuses {
		return false
	}
	body, e := eventBody(c.ev)
	if e != nil || strictJSON(body) != nil {
		return false
	}
	return h.otherTenant(c, body) == nil
}

// addsHeaders reports whether policy p adds a header to an answer that
// is no replay (Policy.Headers): the ERP policy's do, to every guarded
// answer; the OpenWOP and commerce policies' add none.
func addsHeaders(p idem.Policy) bool {
	if p.Headers == nil {
		return false
	}
	h := map[string][]string{}
	p.Headers(h, idem.Answer{Key: "k", RequestID: "r"})
	return len(h) > 0
}

// unrecorded reports whether the Guard's policy records no answer e
// (idem.Forget): such a refusal answered before the claim is the answer
// it would have been under it, nothing recorded either way.
func (h *Handler) unrecorded(e *apierr.Error) bool {
	cache := h.guard.Policy.Cache
	if cache == nil {
		cache = idem.PolicyOpenWOP.Cache
	}
	return cache(e.Status, e.Code) == idem.Forget
}

// jsonBodyRefusal is the 400 validation_error of a body that is JSON text
// but not strict RFC 8785 input (jsonerr.Check: a member name twice,
// invalid UTF-8, a lone surrogate, a number no double holds), on a route
// whose serve reads its body as JSON whatever the headers
// (Route.jsonBody). Layer 1 refuses such a body, with the same answer,
// only when it digests it as JSON (layer1); otherwise the host's parser
// would pick one of two duplicate members, or store a string whose invalid
// bytes a store keeping UTF-8 text replaces. nil when Layer 1 decides
// (it digests the body as JSON, or refuses the request before reading
// it), and for a body that is not JSON text at all (the route's parser
// answers it), and for a body that is not JSON text at all (a bracket too
// many, trailing text), the same 400 Layer 1 gives it: a route's decoder
// reads the first value only, and would take the rest unread.
func (h *Handler) jsonBodyRefusal(r Route, c call) *apierr.Error {
	if l := h.layer1(r, c.ev); l.refuses || l.active && l.keyed && l.json {
		return nil
	}
	body, e := eventBody(c.ev)
	if e != nil || len(body) == 0 {
		return nil // the route answers it
	}
	return strictJSON(body)
}

// strictJSON is the 400 validation_error Layer 1 gives a JSON body that is
// not strict RFC 8785 input (jsonerr.Check) or not JSON text at all; nil
// for strict JSON text.
func strictJSON(body []byte) *apierr.Error {
	if e := jsonerr.Check(body); e != nil {
		return e
	}
	if !json.Valid(body) {
		return jsonerr.Refusal(body, errNotJSON)
	}
	return nil
}

// errNotJSON is the cause jsonBodyRefusal gives jsonerr.Refusal for a body
// that is not JSON text.
var errNotJSON = errors.New("not JSON text")

// layer1Reading is what Layer 1 does with a request before its handler
// runs (Handler.layer1).
type layer1Reading struct {
	// active: the Guard runs the route under the protocol.
	active bool
	// refuses: it refuses the request before reading its body (a key
	// required and missing, or invalid).
	refuses bool
	// keyed: the request carries an Idempotency-Key.
	keyed bool
	// json: it reads the body as JSON (a JSON Content-Type, or a route
	// JSON to the Guard): a keyed request's digest, which refuses a body
	// that is not strict JSON, and, keyed or not, the body's tenant.
	json bool
}

// layer1 says what Layer 1 does with a request to r before the handler
// runs, so the host checks a JSON body only where Layer 1 does not, and
// never before a refusal of Layer 1 that comes first. A route the Guard
// answers another way (skipped, a derived key, a contract) is not active.
func (h *Handler) layer1(r Route, ev events.APIGatewayV2HTTPRequest) layer1Reading {
	g := &h.guard
	if g.Disabled || !r.Idempotent {
		return layer1Reading{}
	}
	op := r.Scope()
	if mapped, ok := g.Operations[op]; ok {
		op = mapped
	}
	route := g.Routes[op]
	if route.Skip || route.DeriveKey != nil || route.Contract != nil {
		return layer1Reading{}
	}
	keys := header.Values(ev.Headers, idem.HeaderKey)
	l := layer1Reading{active: true, keyed: len(keys) > 0,
		json: route.JSON || header.IsJSON(header.First(ev.Headers, "Content-Type"))}
	switch {
	case !l.keyed:
		l.refuses = g.Required
	case len(keys) > 1:
		l.refuses = true
	default:
		l.refuses = g.Policy.Key.Validate(keys[0]) != nil
	}
	return l
}
