package idem

import (
	"context"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// Request is one API Gateway HTTP API (payload format 2.0) request for
// Guard.Do.
type Request struct {
	// Event is the request as API Gateway delivered it. Do never rewrites
	// it.
	Event events.APIGatewayV2HTTPRequest

	// Operation is the routed operation the request is scoped and
	// fingerprinted by, mapped through Config.Operations. Set it when the
	// handler routes by itself behind the catch-all ($default) route, to
	// the operation its router matched: a route template with Params set
	// to the values it matched, which then stand for the raw path in the
	// request fingerprint (as for any routeKey but $default), or a
	// concrete operation that names the resource itself. A template
	// ("{name}" segments, or another router's ":name" and "*name") without
	// Params (nil or empty), or with Params lacking a value for one of its
	// names, keeps the raw path in the fingerprint, so one key sent to
	// another resource of the route is 409 idempotency_key_mismatch,
	// never the first resource's response replayed. Default "": the
	// event's routeKey.
	Operation string

	// Params are the concrete path parameters of Operation, by name: part
	// of the request fingerprint, never of the scope. A handler that routes
	// by itself sets Operation to the route template ("POST
	// /runs/{runId}/cancel") and Params to its values, as API Gateway does
	// for a declared route, so one key is one record per route and the
	// same key on another resource of that route is 409
	// idempotency_key_mismatch, never a second execution. Default nil: the
	// event's PathParameters.
	Params map[string]string

	// Object loads the object a key's first execution on this route
	// created, for a policy whose replays render it (Policy.Replay
	// ReplayObject: the commerce policy's Action). Default nil: replays
	// render the stored response.
	Object ObjectLoader
}

// Do runs fn for one request under the Layer-1 protocol: the per-request
// verb the HTTPAPI adapter wraps. The tenant comes from Config.Tenant (the
// authorizer context, never the body); the key, the fingerprint and the
// record are as for HTTPAPI.
//
// Guarantees (per scope, while the record is retained; see Guard): of any
// number of concurrent or sequential calls with the same scope and
// digest, fn runs to a final outcome at most once, as long as it finishes
// within its lease, and every other call gets that response replayed
// byte-exactly, marked by the policy's headers; a different digest is 409
// idempotency_key_mismatch and fn does not run. fn receives a context that
// carries the claim (FromContext, Transact). A request that is not guarded
// (a safe method, no key where none is required, a skipped route,
// idempotency disabled) runs fn directly.
//
// Store round trips: a first execution costs two (claim, complete); a
// replay one; a request that is not guarded none.
//
// Do never returns an error: an error or panic of fn becomes a 500
// envelope and leaves the record retryable, so the result can be returned
// from a Lambda handler as it is. An answer of fn that cannot be read (a
// StatusCode outside 100..599, IsBase64Encoded with a body that is not
// base64) is a 500 envelope too, but fn ran: the record keeps the attempt
// as not kept, as Guard says, and fn does not run again. Response cookies (the Cookies field) are
// passed through with the handler's own answer on the first response, never
// with another answer sent in its place (the 500 for an answer that cannot
// be read, the handler's answer to its writes' conflict, a failed
// completion), and never cached. Do panics when
// Config.Tenant is unset, as HTTPAPI does (a wiring error).
func (g *Guard) Do(ctx context.Context, req Request, fn func(context.Context) (events.APIGatewayV2HTTPResponse, error)) (events.APIGatewayV2HTTPResponse, error) {
	g.requireTenant("Do")
	in := requestPool.Get().(*request) // request and transaction: zero
	fromV2(in, &req, &g.cfg.Tenant)
	if g.cookieHeader && len(req.Event.Cookies) > 0 {
		in.parts.header = v2Cookie(req.Event.Cookies)
	}
	var cookies []string
	var text string // the handler's body, when text
	// Read from the request's context: the handler's may make a context
	// of its own on a lookup (leaseCtx).
	lambda := inLambda(ctx)
	if lambda {
		in.lambdaShape = shapeV2
	}
	resp := g.serve(ctx, in, func(ctx context.Context) (*Response, error) {
		out, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		if !out.IsBase64Encoded {
			text = out.Body
		}
		r, err := fromLambda(&in.handled, in.handledVals[:0], out.StatusCode, out.Headers, out.MultiValueHeaders, out.Body, out.IsBase64Encoded)
		if err == nil && out.StatusCode >= 100 && out.StatusCode <= 599 {
			// An answer the Guard can read (safeCall checks the status):
			// only the handler's own answer carries its cookies, never
			// the Guard's 500 for an answer it cannot read.
			cookies = out.Cookies
		}
		if err == nil && lambda {
			size := lambdaSize(out.Body, out.Headers, out.MultiValueHeaders, out.Cookies)
			if mayOverLambda(size) {
				markOverLambda(in, r, toV2(r, cookies, text), size)
			}
		}
		return r, err
	})
	if !in.ownAnswer {
		// Another answer went out in its place (a replay, the handler's
		// answer to its writes' conflict, or a 500 for a completion that
		// failed): what the cookies were set for did not commit. The
		// handler's answer, as it is or built anew (its body stamped with
		// the request id, or rendered by a Contract), keeps them.
		cookies = nil
	}
	if text == "" {
		text = in.replayText
	}
	out := toV2(resp, cookies, text)
	if in.reusable {
		// A straight replay: nothing outside the request points into it
		// (request.reusable), and the answer is built.
		*in = request{}
		requestPool.Put(in)
	}
	return out, nil
}

// requestPool holds requests of straight replays for reuse (Do), zeroed:
// a replay then allocates no request, about two fifths of its bytes.
var requestPool = sync.Pool{New: func() any { return new(request) }}
