package devstack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
)

// gateway serves net/http requests through the same authorizer and api
// handler code that Lambda runs, translating each request to an API Gateway
// HTTP API payload-2.0 event (as the HttpApi in template.yaml would) and the
// handler's response back.
//
// Like a Lambda invocation, each request runs under a deadline (timeout,
// default DefaultRequestTimeout) with a Lambda context, so the idempotency
// lease is the remaining time plus skew, as deployed. When the store does
// not answer within it, or cannot be reached, the answer is 503
// idemkit.store_unavailable with Retry-After instead of a 500. A client
// that hangs up is not a store outage: its request is answered 499
// idemkit.client_closed_request and logged as a hang-up (clientClosed).
type gateway struct {
	api  *apifn.Handler
	auth *authfn.Handler
	// authCache, when set, keeps the authorizer's decisions per
	// Authorization value as API Gateway does (template.yaml
	// ReauthorizeEvery); nil asks the authorizer on every request.
	authCache *authCache
	// seams, when set (`idemkit dev --conformance-seams`), serves the
	// conformance seams profile under /conformance/seams/, authenticated
	// like the run routes. Nil: that path space is the api's 404.
	seams *seams
	// timeout is each request's deadline (0: DefaultRequestTimeout).
	timeout time.Duration
	// policy is Layer 1's policy, whose envelope and headers the
	// gateway's own refusals of bad input use (writePolicyError). Zero:
	// the OpenWOP envelope, no policy headers.
	policy idem.Policy
	// log receives the gateway's own lines (a client that hung up). Nil:
	// slog.Default().
	log *slog.Logger
	// sseKeepAlive and sseReread are a held event stream's keep-alive and
	// re-read periods (0: devSSEKeepAlive, devSSEReread; devsse.go).
	sseKeepAlive, sseReread time.Duration
	// streams ends the held event streams when the server stops. Nil:
	// they end with their run or their client only.
	streams *streamCloser
}

// invocation is the context of one invocation of a function behind the
// gateway: parent under the request deadline (g.timeout, default
// DefaultRequestTimeout), carrying reqID as its Lambda request id.
func (g *gateway) invocation(parent context.Context, reqID string) (context.Context, context.CancelFunc) {
	timeout := g.timeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: reqID}), cancel
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := requestID()
	ctx, cancel := g.invocation(r.Context(), reqID)
	defer cancel()
	ctx, watch := withStoreWatch(ctx)
	storeDown := func() bool { return watch.failed.Load() || ctx.Err() != nil && r.Context().Err() == nil }
	if g.seams != nil && g.seams.dur != nil && g.seams.dur.dying.Load() {
		// The durability seam is killing this process: it serves nothing
		// more, so that no client takes it for the restarted one.
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", "1")
		g.writeEnvelope(w, reqID, apierr.New(http.StatusServiceUnavailable, CodeRestarting,
			"this process is being restarted; retry in a moment"))
		return
	}

	// Bad input the gateway itself refuses, before the body, the
	// authorizer or the api (devraw.go).
	rawPath := r.URL.EscapedPath()
	rawKeys, haveRaw, refuse := rawHeaders(r)
	if refuse != nil {
		g.writePolicyError(w, refuse, reqID)
		return
	}
	// A major this host does not serve, on every route (the seams too).
	if e := apifn.VersionRefusal(r.Header.Values(apifn.HeaderVersion)); e != nil {
		g.writeEnvelope(w, reqID, e)
		return
	}
	if e, allow := apifn.MethodCaseRefusal(r.Method, rawPath); e != nil {
		w.Header().Set("Allow", allow)
		g.writePolicyError(w, e, reqID)
		return
	}

	// A body declared over the limit is refused before a byte of it is
	// read (nor 100 Continue sent), as API Gateway refuses one over its
	// own; the connection is closed after the answer, its body unread.
	if r.ContentLength > apifn.MaxBodyBytes {
		w.Header().Set("Connection", "close")
		g.writeEnvelope(w, reqID, apierr.New(http.StatusRequestEntityTooLarge, apierr.CodePayloadTooLarge,
			"the body exceeds %d bytes", apifn.MaxBodyBytes))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, apifn.MaxBodyBytes+1))
	if err != nil {
		// A body that stopped arriving (the server's ReadTimeout ended the
		// wait) is a timeout the client may retry, not a malformed body
		// (RED_TEAM 361).
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			w.Header().Set("Connection", "close")
			g.writeEnvelope(w, reqID, apierr.New(http.StatusRequestTimeout, codeRequestTimeout, "the request body was not received in time"))
			return
		}
		g.writeEnvelope(w, reqID, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "could not read the body"))
		return
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "$default",
		RawPath:        rawPath,
		RawQueryString: r.URL.RawQuery,
		Headers:        map[string]string{},
	}
	for k, vs := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			ev.Cookies = append(ev.Cookies, vs...)
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	// The key as received, whitespace kept, repeated headers joined with
	// commas, as API Gateway's HTTP API passes it (devraw.go).
	if haveRaw && len(rawKeys) > 0 {
		ev.Headers[strings.ToLower(idem.HeaderKey)] = strings.Join(rawKeys, ",")
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	srcIP, _, _ := net.SplitHostPort(r.RemoteAddr)
	ev.RequestContext = events.APIGatewayV2HTTPRequestContext{
		RouteKey: "$default", Stage: "$default", RequestID: reqID, DomainName: r.Host,
		TimeEpoch: time.Now().UnixMilli(),
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
			Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: srcIP, UserAgent: r.UserAgent(),
		},
	}
	seam := g.seams != nil && (isSeamPath(rawPath) || isDurabilityPath(rawPath))
	if seam || apifn.Authorized(r.Method, rawPath) {
		// The authorizer function's own Lambda handler, on the request as
		// API Gateway presents it (header names lower-cased, repeated
		// headers joined with ","), so a request the deployed stack refuses
		// (e.g. two Authorization headers) is refused here too; its context
		// is passed on exactly as API Gateway passes it. Its decision is
		// kept per Authorization value for the authorizer TTL, as API
		// Gateway keeps it (authCache).
		res, err := g.authorize(ctx, ev)
		switch {
		case errors.Is(err, authfn.ErrUnauthorized) || err == nil && !res.IsAuthorized:
			// A 401 names the scheme to use (RFC 9110 §11.6.1), as the api
			// function's own 401 does.
			w.Header().Set("WWW-Authenticate", `Bearer realm="idemkit"`)
			g.writeEnvelope(w, reqID, apierr.New(http.StatusUnauthorized, apierr.CodeUnauthenticated, "a valid API key is required (Authorization: Bearer <key>)"))
			return
		case err != nil && r.Context().Err() != nil:
			g.clientClosed(w, r, reqID)
			return
		case err != nil && storeDown():
			g.writeStoreUnavailable(w, r, reqID)
			return
		case err != nil:
			g.writeEnvelope(w, reqID, apierr.New(http.StatusInternalServerError, "internal_error", "authorizer failed"))
			return
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: res.Context}
		if seam {
			tenant, _ := res.Context[authfn.ContextTenantKey].(string)
			g.seams.serve(ctx, w, r, rawPath, tenant, body)
			return
		}
	}
	resp, err := g.api.Handle(ctx, ev)
	if r.Context().Err() != nil && (err != nil || resp.StatusCode >= http.StatusInternalServerError || resp.StatusCode == idem.StatusClientClosed) {
		// The failure is the client's hang-up, not the store's: an answer
		// the handler made before it noticed still goes out (a client that
		// only half-closed reads it).
		g.clientClosed(w, r, reqID)
		return
	}
	if (err != nil || resp.StatusCode == http.StatusInternalServerError) && storeDown() {
		g.writeStoreUnavailable(w, r, reqID)
		return
	}
	if err != nil {
		g.writeEnvelope(w, reqID, apierr.New(http.StatusInternalServerError, "internal_error", "internal error"))
		return
	}
	out := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			g.writeEnvelope(w, reqID, apierr.New(http.StatusInternalServerError, "internal_error", "bad response encoding"))
			return
		}
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	if holdsStream(r, rawPath, resp) {
		// A live run's event stream stays open (devsse.go), unlike
		// behind API Gateway, which buffers a Lambda's whole answer.
		g.holdStream(w, r, ev, resp, reqID)
		return
	}
	w.WriteHeader(resp.StatusCode)
	if r.Method != http.MethodHead {
		_, _ = w.Write(out)
	}
}

// clientClosed answers a request whose client hung up before its answer
// (its context cancelled): logged at info as what it is, answered the
// policy's 499 idemkit.client_closed_request (a client that only
// half-closed reads it; one that left reads nothing), never the store's
// 503. Layer 1 counts it (idem.MetricClientCancelled) on its routes.
func (g *gateway) clientClosed(w http.ResponseWriter, r *http.Request, reqID string) {
	log := g.log
	if log == nil {
		log = slog.Default()
	}
	log.Info("dev: the client closed the request", slog.String("method", r.Method), slog.String("requestId", reqID))
	g.writePolicyError(w, apierr.New(idem.StatusClientClosed, idem.CodeClientClosed,
		"The client closed the request before it was answered; retry it with the same Idempotency-Key."), reqID)
}

// DefaultRequestTimeout is `idemkit dev --request-timeout`'s default: the
// deadline of each request, store calls included (a conformance-delay
// request holds its answer up to 10 s).
const DefaultRequestTimeout = 15 * time.Second

// authorize asks the authorizer about ev (through g.authCache, so a kept
// decision answers without it), as API Gateway asks it for each request.
func (g *gateway) authorize(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	return g.authCache.authorize(ctx, g.auth, events.APIGatewayV2CustomAuthorizerV2Request{
		Version: "2.0", Type: "REQUEST", RouteKey: ev.RouteKey, RawPath: ev.RawPath, RawQueryString: ev.RawQueryString,
		Headers: ev.Headers, IdentitySource: identitySource(ev.Headers), RequestContext: ev.RequestContext,
	})
}

// identitySource is the authorizer's identity source ($request.header.
// Authorization) as API Gateway resolves it: absent when the header is.
func identitySource(h map[string]string) []string {
	if v, ok := h["authorization"]; ok {
		return []string{v}
	}
	return nil
}

// writeEnvelope answers the envelope e to the request reqID as the api
// handler answers it (marked with the request id where the policy says so:
// under the ERP policy X-Request-ID and request_id).
func (g *gateway) writeEnvelope(w http.ResponseWriter, reqID string, e *apierr.Error) {
	resp := g.api.ErrorAnswer(e, reqID)
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("OpenWOP-Version", settings.ProtocolVersion)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write([]byte(resp.Body))
}

func writeEnvelope(w http.ResponseWriter, e *apierr.Error) {
	for k, v := range e.Headers() {
		w.Header().Set(k, v)
	}
	w.Header().Set("OpenWOP-Version", settings.ProtocolVersion)
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
