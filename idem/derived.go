package idem

import (
	"context"

	"github.com/idemkit/idemkit/internal/apierr"
)

// derivedScopePrefix puts the records of derived keys (Route.DeriveKey) in
// a keyspace of their own: no tenant scope ("tenant:", "tenant+:", "anon:",
// "event:") starts with it, so a derived key never replays or blocks a
// caller's Idempotency-Key of the same value, nor the reverse.
const derivedScopePrefix = "derived:"

// serveDerived runs the protocol for a request on a route whose key is
// derived from the request (Route.DeriveKey): the key comes from the
// route's function, and everything after it (scope, digest, claim, wait,
// replay) is the caller-key protocol in the derived keyspace.
func (g *Guard) serveDerived(ctx context.Context, in *request, op string, route Route, run handlerFunc) *Response {
	if len(in.keyValues) > 0 {
		return g.decorate(g.errorResponse(apierr.New(400, apierr.CodeIdempotencyKeyInvalid,
			"This operation derives its idempotency key from the request; send it without an Idempotency-Key header.").
			WithDetails(map[string]any{"reason": "not_accepted"}), in.requestID), in, "", false, "")
	}
	if in.bodyErr != nil {
		return g.decorate(g.errorResponse(apierr.New(400, apierr.CodeValidation,
			"The request body could not be decoded."), in.requestID), in, "", false, "")
	}
	key, err := route.DeriveKey(in.userBody(), in.headerReader())
	if err != nil || key == "" {
		// The function's error may quote the request: it is neither shown
		// nor logged.
		return g.decorate(g.errorResponse(apierr.New(400, apierr.CodeValidation,
			"The request lacks the value this operation's idempotency key is derived from.").
			WithDetails(map[string]any{"reason": ReasonMissing}), in.requestID), in, "", false, "")
	}
	t := &txn{g: g, in: in, key: key, op: op, contract: route.Contract, derived: true}
	return t.run(ctx, route, run)
}
