package apifn

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/keyhash"
)

// serve runs route r's handler. An error that says one of the host's
// stores (the runs, inbox or effects table on DynamoDB) could not be used
// — throttled past the SDK's retries, a 5xx, no connection, no answer in
// time — is answered 503 idemkit.store_unavailable with Retry-After, as
// Layer 1 answers its own store's outage, never a 500: the request did
// not fail, the store was briefly out of reach, and a retry is safe (with
// the same key, when the request had one: a 5xx answer leaves the key's
// record retryable; with Layer 1 off a key is not read, so the message
// names none). The error
// of a request whose client hung up (its context cancelled) is returned
// as it is.
func (h *Handler) serve(ctx context.Context, r Route, c call) (events.APIGatewayV2HTTPResponse, error) {
	resp, err := r.serve(h, ctx, c)
	if err == nil || errors.Is(ctx.Err(), context.Canceled) || !storeDown(err) {
		return resp, err
	}
	h.cfg.Logger.WarnContext(ctx, "api: a store is unavailable", keyhash.ErrAttr(err),
		slog.String("request_id", c.ev.RequestContext.RequestID))
	e := apierr.New(http.StatusServiceUnavailable, idem.CodeStoreUnavailable, "%s", storeUnavailableMessage(r.Idempotent && !h.guard.Disabled && keyed(c.ev)))
	out := errResp(e)
	out.Headers[idem.HeaderRetryAfter] = strconv.Itoa(int(math.Max(1, math.Ceil(h.cfg.Guard.Config().InFlightRetryAfter.Seconds()))))
	return out, nil
}

// storeUnavailableMessage is the message of the 503: a request that
// carried an Idempotency-Key on a route that honours it is told to retry
// with the same key; any other (a read, a write sent without a key) only
// to retry after the Retry-After delay.
func storeUnavailableMessage(keyed bool) string {
	if keyed {
		return "A store is unavailable; retry the request with the same Idempotency-Key after the Retry-After delay."
	}
	return "A store is unavailable; retry the request after the Retry-After delay."
}

// keyed reports whether ev carries a non-blank Idempotency-Key.
func keyed(ev events.APIGatewayV2HTTPRequest) bool {
	for _, v := range header.Values(ev.Headers, idem.HeaderKey) {
		if strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}

// storeDown reports whether err says a store could not be used.
func storeDown(err error) bool {
	return awserr.Unavailable(err) || errors.Is(err, idem.ErrStoreUnavailable)
}
