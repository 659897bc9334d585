package idem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/textproto"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// Guard applies the Layer-1 protocol to requests. Build one with New, then
// wrap handlers with HTTPAPI, REST or Middleware. A Guard is safe for
// concurrent use.
//
// Guarantees, per scope (the tenant, the policy's Scope parts and the key) and while the record is
// retained:
//   - Of any number of concurrent or sequential requests with the same digest,
//     the handler runs to a final outcome (2xx or non-retryable 4xx) at most
//     once, as long as it finishes within its lease; every other request gets
//     that response replayed byte-exactly, marked by the policy's headers.
//     Which outcomes are final is the policy's Cache. A final response
//     whose body is larger than MaxResponseBytes (or, through the API
//     Gateway adapters, whose answer is too large for Lambda to return: see
//     MaxResponseBytes) is answered to its caller and recorded as not kept
//     (Response.NotKept): every other request is answered 410
//     CodeResponseNotKept, and the handler never runs again. So is an
//     answer the Guard cannot read (a status outside 100..599, an API
//     Gateway body marked base64 that does not decode), whose caller gets
//     500 internal_error saying the request is not run again: the handler
//     returned, its work done; only a status the policy never keeps
//     (below) is released, whatever the body.
//     Under PolicyOpenWOP:
//   - 408, 429, 499, 5xx, handler errors and panics are never replayed: the record
//     becomes retryable-failure and a same-key retry runs the handler again
//     (handler errors and panics under every policy).
//   - 400 idempotency_key_invalid, 400 validation_error, 401 and 403 leave no
//     record behind.
//   - A different digest gets 409 idempotency_key_mismatch, never the cached
//     body.
//   - Every write after the claim is fenced on the claim's owner token, so an
//     invocation whose lease was reclaimed can neither overwrite nor delete
//     the new owner's record; writes returned through Transact commit in the
//     same transaction as the completion, or not at all.
//
// Store round trips: a first execution costs two (claim, complete); a replay
// costs one (the failed claim returns the record).
type Guard struct {
	cfg   Config
	log   *slog.Logger
	clock Clock
	// hash renders a key for the logs (Config.KeyHashSecret).
	hash func(string) string
	// storeWarned is set once the store's misconfiguration has been
	// logged (storeMisconfigured).
	storeWarned atomic.Bool
	// tracer records the spans (Config.TracerProvider).
	tracer trace.Tracer
	// systemClock is set when the Guard's clock is the system clock, whose
	// Now is the wall clock's reading (wallAt).
	systemClock bool
	// cookieHeader is set when a route declares Cookie among its
	// fingerprint headers (Route.Headers), which an HTTP API event
	// carries in its cookies list (v2Cookie).
	cookieHeader bool
	// hostHeader is set when a route declares Host among its fingerprint
	// headers, which Go's server moves out of Request.Header into
	// Request.Host (netHostHeader).
	hostHeader bool
}

// New validates cfg, fills in defaults and returns a Guard.
func New(cfg Config) (*Guard, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	_, system := c.Test.Clock.(clock.System)
	cookie, host := false, false
	for _, r := range c.Routes {
		cookie = cookie || slices.Contains(r.Headers, "Cookie")
		host = host || slices.Contains(r.Headers, "Host")
	}
	return &Guard{cfg: c, log: c.Logger, clock: c.Test.Clock, hash: keyhash.New(c.KeyHashSecret).Log, tracer: tracer(c.TracerProvider),
		systemClock: system, cookieHeader: cookie, hostHeader: host}, nil
}

// v2Cookie reads the Cookie header of an HTTP API (payload 2.0) event from
// its cookies list, where API Gateway puts it, joined as the header was:
// the header source of a request on a Guard some route of which declares
// Cookie among its fingerprint headers (Guard.cookieHeader).
func v2Cookie(cookies []string) func(name string) []string {
	return func(name string) []string {
		if strings.EqualFold(name, "Cookie") {
			return []string{strings.Join(cookies, "; ")}
		}
		return nil
	}
}

// wallAt returns the wall time at now, a reading of the Guard's clock just
// taken: now itself when that clock is the system clock (one reading
// serves a record's times and a store call's deadline), else a reading of
// the wall clock (a test's clock is not the wall's).
func (g *Guard) wallAt(now time.Time) time.Time {
	if g.systemClock {
		return now
	}
	return clock.Wall()
}

// Config returns the effective configuration (defaults filled in).
func (g *Guard) Config() Config { return g.cfg }

// request is the adapter-neutral view of an incoming request. It is the
// request's one allocation, with its transaction; it fits the 704-byte
// size class (TestRequestSizeClass), which a field more may leave. Do
// takes it from requestPool, where a straight replay puts it back
// (reusable): nothing outside the request points into it then (the
// claim's store call context lives with the names, claimNames).
type request struct {
	method      string
	operation   string // routed operation (before Operations mapping)
	tenant      string // authenticated tenant, "" if none
	keyValues   []string
	contentType string
	accept      string // the Accept header (Contract.Render)
	// body is the request body, only ever read: with bodyView set it is
	// the event's string itself (an API Gateway text body, not copied), so
	// code outside this package gets it through userBody.
	body      []byte
	bodyView  bool
	bodyErr   error // body could not be decoded (bad base64)
	requestID string
	parts     requestParts // path parameters, query, headers (fingerprint)
	// credential reads a credential value named in Policy.Scope.Credential
	// ("" = absent); nil when the adapter has none.
	credential func(name string) string
	// v2Tenant, when set, is the Guard's tenant source for an HTTP API
	// request, and v2Headers and v2Auth that event's headers and
	// authorizer: credentials and headers are then read from them
	// directly (credentialValue, headerValues), which saves Do two
	// closures per request and a copy of the event.
	v2Tenant  *TenantSource
	v2Headers map[string]string
	v2Auth    *events.APIGatewayV2HTTPRequestContextAuthorizerDescription
	keyBuf    [1]string // backing array of keyValues for the usual single key header
	// handled and handledVals are the storage of the handler's response
	// as converted by fromLambda, and of its first one-value headers.
	handled     Response
	handledVals [4]string
	// overLambda says the handler's answer, as an API Gateway adapter
	// returns it, is too large for Lambda to return (overLambdaPayload):
	// recorded as not kept.
	overLambda bool
	// scopeMethod says the routed operation is a route that serves any
	// method and does not name the request's (an HTTP API "ANY /path" or
	// "$default" route key, a ServeMux pattern without a method): a
	// policy that scopes keys by operation scopes them by the method too
	// (txn.run).
	scopeMethod bool
	// ownAnswer says the answer the Guard returns is built from the
	// handler's own (stamped with the request id, rendered by a Contract,
	// decorated), not one the Guard wrote in its place: the HTTP API
	// adapters send the handler's cookies (the v2 Cookies field) with it
	// only then.
	ownAnswer bool
	// lambdaShape is the response an adapter running in a Lambda
	// invocation returns (shapeV2, shapeV1; shapeProxy for net/http behind
	// an API Gateway proxy), shapeNone elsewhere:
	// an answer the Guard records without the adapter's closure (the
	// handler's answer to a conflict, OnConflict) is measured by it
	// (overLambdaAnswer).
	lambdaShape uint8
	// reusable says the request was a straight replay (txn.claim), which
	// handed nothing of the request to code that may keep it: Do puts it
	// back in requestPool once the answer is built.
	reusable bool
	// v2Absent says which of the headers requests seldom send an HTTP API
	// request's headers do not hold under any name (v2Headers: rareEncoding,
	// rareOverride), so that codedBody and methodOverride need not look
	// again; 0 (unknown) for other requests.
	v2Absent uint8
	// replayText is a replay's answer body viewed as a string (bodyString),
	// when that body is still the bytes of the record the store returned:
	// the adapters' response body without a copy (txn.replay).
	replayText string
	// txn is the storage of the request's transaction (serve).
	txn txn
	// object loads the route's object for ReplayObject (Request.Object);
	// nil when the adapter or the route has none.
	object ObjectLoader
}

// credentialValue returns the credential value named name ("" = absent).
func (in *request) credentialValue(name string) string {
	switch {
	case in.v2Tenant != nil:
		return in.v2Tenant.credentialV2(in.v2Auth, name)
	case in.credential != nil:
		return in.credential(name)
	}
	return ""
}

// hasHeaders reports whether the request's headers can be read.
func (in *request) hasHeaders() bool { return in.v2Tenant != nil || in.parts.header != nil }

// headerValues returns the values of the request header name (nil when
// the headers cannot be read).
func (in *request) headerValues(name string) []string {
	return headerValuesOf(in.v2Tenant != nil, in.v2Headers, in.parts.header, name)
}

// headerReader is headerValues as a function bound to the request's
// headers, not to the request, for code outside this package that may
// keep it (Route.DeriveKey): Do reuses a straight replay's request for a
// later one (requestPool), whose headers a reader bound to the request
// would read (RED_TEAM 337).
func (in *request) headerReader() func(name string) []string {
	v2, h, parts := in.v2Tenant != nil, in.v2Headers, in.parts.header
	return func(name string) []string { return headerValuesOf(v2, h, parts, name) }
}

// headerValuesOf is headerValues of a request whose headers are the HTTP
// API event's h when v2, else read by parts (the event's cookies list
// under v2: Do, v2Cookie).
func headerValuesOf(v2 bool, h map[string]string, parts func(string) []string, name string) []string {
	switch {
	case v2:
		vs := header.Values(h, name)
		if len(vs) == 0 && parts != nil {
			// The event's cookies list (Do, v2Cookie).
			return parts(name)
		}
		return vs
	case parts != nil:
		return parts(name)
	}
	return nil
}

// appendHeaderValues appends the values headerValues returns to dst,
// without the list of them headerValues allocates for an API Gateway
// event's headers.
func (in *request) appendHeaderValues(dst []string, name string) []string {
	if in.v2Tenant != nil {
		n := len(dst)
		dst = header.AppendValues(dst, in.v2Headers, name)
		if len(dst) > n || in.parts.header == nil {
			return dst
		}
	}
	return append(dst, in.headerValues(name)...)
}

// handlerFunc runs the wrapped handler and returns its response.
type handlerFunc func(ctx context.Context) (*Response, error)

func mutating(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return false
	}
	return true
}

// errorResponse renders an error answer of the Guard with the policy's
// error body.
func (g *Guard) errorResponse(e *apierr.Error, requestID string) *Response {
	body := g.cfg.Policy.ErrorBody
	if body == nil {
		body = openWOPErrorBody
	}
	// An envelope the policy's ErrorBody renders without the policy's
	// request-id member gains it, as a host's own envelopes do.
	return stampMember(g.cfg.Policy.RequestIDMember, &Response{
		Status:  e.Status,
		Headers: map[string][]string{"Content-Type": {"application/json"}},
		Body:    body(ErrorInfo{Status: e.Status, Code: e.Code, Message: e.Message, Details: e.Details, RequestID: requestID}),
	}, requestID)
}

func newOwnerToken() string {
	var out [ownerTokenLen]byte
	return string(appendOwnerToken(out[:0]))
}

// ownerTokenLen is the length of an owner token: 16 random bytes in hex.
const ownerTokenLen = 32

// appendOwnerToken appends a new owner token to dst.
func appendOwnerToken(dst []byte) []byte {
	var b [ownerTokenLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("idem: no randomness: " + err.Error())
	}
	return hex.AppendEncode(dst, b[:])
}

// operation maps a routed operation to its canonical id.
func (g *Guard) operation(routed string) string {
	if op, ok := g.cfg.Operations[routed]; ok {
		return op
	}
	return routed
}

// serve runs the protocol for one request and always returns a response.
// in is new, or zeroed (Do's requestPool): each adapter makes or takes one
// per request.
func (g *Guard) serve(ctx context.Context, in *request, run handlerFunc) *Response {
	if g.cfg.Disabled || !mutating(in.method) {
		return g.plain(ctx, in, run)
	}
	op := g.operation(in.operation)
	route := g.cfg.Routes[op]
	if route.Skip {
		return g.plain(ctx, in, run)
	}
	if route.DeriveKey != nil {
		return g.serveDerived(ctx, in, op, route, run)
	}
	key, present, err := parseKey(in.keyValues, g.cfg.Policy.Key)
	if err != nil {
		var ke *KeyError
		errors.As(err, &ke)
		msg := "The Idempotency-Key header is invalid (%s)."
		if ke.Reason == ReasonLength || ke.Reason == ReasonCharset {
			// What a key is, for a caller who sent "order-1" (RED_TEAM 323).
			msg = "The Idempotency-Key header is invalid (%s): " + strings.ReplaceAll(g.cfg.Policy.Key.advice(), "%", "%%") + "."
		}
		return g.decorate(g.errorResponse(apierr.New(400, apierr.CodeIdempotencyKeyInvalid,
			msg, ke.Reason).
			WithDetails(map[string]any{"reason": ke.Reason}), in.requestID), in, "", false, "")
	}
	if !present {
		if g.cfg.Required {
			return g.decorate(g.errorResponse(apierr.New(400, apierr.CodeIdempotencyKeyInvalid,
				"The Idempotency-Key header is required on this operation.").
				WithDetails(map[string]any{"reason": ReasonMissing}), in.requestID), in, "", false, "")
		}
		if in.bodyErr == nil && (route.JSON || header.IsJSON(in.contentType)) && g.bodyTenantDiffers(in) {
			// Not deduplicated, but the body still names another tenant:
			// the answer a keyed request gets, and the handler does not run.
			return g.decorate(g.errorResponse(errTenantMismatch(), in.requestID), in, "", false, "")
		}
		return g.decorate(render(route, g.stampRequestID(g.plain(ctx, in, run), in.requestID), in.accept), in, "", false, "")
	}
	// The transaction is allocated with the request, which is new (or
	// zeroed) and so zero: its fields are set one by one, not copied in whole from a
	// literal (over 300 bytes, under the collector's write barrier while
	// it marks).
	t := &in.txn
	t.g, t.in, t.key, t.op, t.contract = g, in, key, op, route.Contract
	return t.run(ctx, route, run)
}

// decorate adds the policy's headers to a response of a guarded request
// (mutating, not opted out, idempotency enabled): key is the valid key, or
// "" when the request had none or an invalid one (never echoed). The
// policy's request-id header (Policy.RequestIDHeader) carries the current
// request's id, so the Guard's answers need no marking by the host.
func (g *Guard) decorate(resp *Response, in *request, key string, replay bool, originalID string) *Response {
	p := &g.cfg.Policy
	stampHeader := p.RequestIDHeader != "" && in.requestID != ""
	if p.Headers == nil && !stampHeader {
		return resp
	}
	if resp.Headers == nil {
		resp.Headers = make(map[string][]string, 4)
	}
	if p.Headers != nil {
		p.Headers(resp.Headers, Answer{Replay: replay, Key: key, RequestID: in.requestID, OriginalRequestID: originalID})
	}
	if stampHeader {
		setRequestIDHeader(resp.Headers, p.RequestIDHeader, in.requestID)
	}
	return resp
}

// plain runs the handler without deduplication (no key, a skipped route,
// a safe method, or idempotency disabled). Errors and panics still become a
// 500 envelope.
func (g *Guard) plain(ctx context.Context, in *request, run handlerFunc) *Response {
	resp, err := safeCall(ctx, run)
	in.ownAnswer = err == nil
	if err != nil {
		level := slog.LevelError
		if clientGone(ctx, err) {
			level = slog.LevelInfo // its client hung up: nobody's failure
		}
		g.log.LogAttrs(ctx, level, "idempotency: handler failed",
			slog.String("request_id", in.requestID), slog.String("error", g.redact(err.Error(), in.keyValues)), stackAttr(err))
		return g.errorResponse(apierr.New(500, "internal_error", "The request failed; it may be retried."), in.requestID)
	}
	return resp
}

// errPanic wraps a recovered handler panic.
var errPanic = errors.New("idem: handler panicked")

// panicError is a recovered handler panic: its value, and the stack of the
// goroutine that panicked, for the log line that reports it (stackAttr).
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("%v: %v", errPanic, e.value) }

// Unwrap makes errors.Is(err, errPanic) true.
func (e *panicError) Unwrap() error { return errPanic }

// stackAttr is the "stack" attribute of a log line reporting err: the
// panicking goroutine's stack when err is a recovered panic (function
// names, files and lines; no argument values beyond machine words), else
// an empty attribute, which slog drops.
func stackAttr(err error) slog.Attr {
	var p *panicError
	if errors.As(err, &p) {
		return slog.String("stack", string(p.stack))
	}
	return slog.Attr{}
}

func safeCall(ctx context.Context, run handlerFunc) (resp *Response, err error) {
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, &panicError{value: p, stack: debug.Stack()}
		}
	}()
	resp, err = run(ctx)
	if err == nil && (resp == nil || resp.Status < 100 || resp.Status > 599) {
		if resp == nil {
			resp = &Response{}
		}
		return nil, unreadable(resp, fmt.Errorf("%w: %d", ErrBadStatus, resp.Status))
	}
	return resp, err
}

// unreadableError is a handler's answer the Guard cannot read: a status
// outside 100..599 (ErrBadStatus), or an API Gateway body marked base64
// that does not decode. Unlike an error the handler returns, it comes
// from a handler that ran to its end, its work done: a keyed attempt is
// recorded as run, its response not kept (txn.execute), so that no retry
// runs it again, as for a response too large to keep.
type unreadableError struct {
	// resp is the answer as far as it could be read: its status (0 when
	// it is not one the Guard answers) and its body as the handler gave
	// it.
	resp *Response
	err  error
}

func (e *unreadableError) Error() string { return e.err.Error() }

func (e *unreadableError) Unwrap() error { return e.err }

// unreadable returns the unreadableError of r, the handler's answer, which
// err says cannot be read; r's status becomes 0 when it is not one the
// Guard answers (every store keeps a 0).
func unreadable(r *Response, err error) *unreadableError {
	if r.Status < 100 || r.Status > 599 {
		r.Status = 0
	}
	return &unreadableError{resp: r, err: err}
}

// leaseFor returns the lease for a claim made now, and whether a heartbeat
// must renew it while the handler runs. Outside Lambda the lease is
// Config.Lease, renewed every Heartbeat. Inside Lambda (the context carries
// a lambdacontext and a deadline) it is Config.Lease capped by the
// invocation's remaining time plus LeaseSkew: when the cap applies the
// lease covers the whole invocation and needs no renewal; when the
// invocation may outlive Config.Lease, the heartbeat renews it as outside
// Lambda, each renewal capped again.
func (g *Guard) leaseFor(ctx context.Context) (time.Duration, bool) {
	if _, ok := lambdacontext.FromContext(ctx); ok {
		if left, ok := clock.Remaining(ctx); ok {
			if capped := left + g.cfg.LeaseSkew; capped < g.cfg.Lease {
				return max(capped, 0), false
			}
		}
	}
	return g.cfg.Lease, true
}

// expires returns the retention end for a write at now (zero = never).
func (g *Guard) expires(now time.Time) time.Time {
	if g.cfg.Retention == Forever {
		return time.Time{}
	}
	return now.Add(g.cfg.Retention)
}

// retryAfter returns the Retry-After seconds for an in-flight answer: the
// poll interval (Config.InFlightRetryAfter) while the owner is alive, the
// time until its lease can be reclaimed when it looks dead.
func (g *Guard) retryAfter(rec *Record, now time.Time) int {
	poll := int(math.Ceil(g.cfg.InFlightRetryAfter.Seconds()))
	if g.cfg.Policy.InFlight.Fixed || rec.State != StatePending || g.ownerAlive(rec, now) {
		return poll
	}
	return max(poll, int(math.Ceil(rec.LeaseExpires.Sub(now).Seconds())))
}

// ownerAlive reports whether the owner of a pending record wrote its lease
// (claim, reclaim or heartbeat renewal) within the last two Heartbeat
// intervals. Outside Lambda a live owner renews every Heartbeat; inside
// Lambda there is no heartbeat and the lease ends with the invocation, so
// an owner counts as alive for two intervals after its claim.
func (g *Guard) ownerAlive(rec *Record, now time.Time) bool {
	return !rec.Renewed.IsZero() && now.Sub(rec.Renewed) < 2*g.cfg.Heartbeat
}

// cacheableInto writes into c (overwritten) the response that is stored
// for resp, every header except Set-Cookie, names canonicalised, and
// returns c. c shares resp's body, and resp's header map when it has
// nothing to change (no Set-Cookie, canonical names: the API Gateway
// adapters' responses), else holds a copy: the store copies what it keeps
// (Store.Complete) before the answer's headers are added to resp. Values
// kept under names that differ only in case are joined in the order of
// their names, byte-wise, the order net/http writes a header map in, so
// the replay carries them as the first answer did (RED_TEAM 342; a map's
// own order is random).
func cacheableInto(c, resp *Response) *Response {
	*c = Response{Status: resp.Status, Body: resp.Body}
	if len(resp.Headers) > 0 && cacheableAsIs(resp.Headers) {
		c.Headers = resp.Headers
		return c
	}
	if len(resp.Headers) > 0 {
		c.Headers = make(map[string][]string, len(resp.Headers))
		for _, k := range slices.Sorted(maps.Keys(resp.Headers)) {
			ck := textproto.CanonicalMIMEHeaderKey(k)
			if ck == "Set-Cookie" {
				continue
			}
			c.Headers[ck] = append(c.Headers[ck], resp.Headers[k]...)
		}
	}
	return c
}

// cacheableAsIs reports whether h is stored as it is: no Set-Cookie, every
// name canonical.
func cacheableAsIs(h map[string][]string) bool {
	for k := range h {
		if k == "Set-Cookie" || textproto.CanonicalMIMEHeaderKey(k) != k {
			return false
		}
	}
	return true
}

// classify maps a handler response to its record transition under the
// policy's Cache, and the state of a kept outcome.
func (g *Guard) classify(resp *Response) (Disposition, State) {
	var d Disposition
	if resp.Status >= 400 {
		if code, read := envelopeCode(resp); read {
			d = g.cfg.Policy.Cache(resp.Status, code)
		} else {
			d = unreadCode(g.cfg.Policy.Cache, resp.Status)
		}
	} else {
		d = g.cfg.Policy.Cache(resp.Status, "")
	}
	switch d {
	case Retry:
		return Retry, StateRetryableFailure
	case Forget:
		return Forget, ""
	}
	if resp.Status >= 400 {
		return Replay, StateTerminalFailure
	}
	// 1xx/2xx/3xx: the request was processed; cached as completed.
	return Replay, StateCompleted
}

// redact replaces every occurrence of the raw keys in s (an error text that
// may quote the request) with their keyed log hash, so a raw key never
// reaches the logs.
func (g *Guard) redact(s string, keys []string) string {
	for _, k := range keys {
		if k != "" && strings.Contains(s, k) {
			s = strings.ReplaceAll(s, k, g.hash(k))
		}
	}
	return s
}
