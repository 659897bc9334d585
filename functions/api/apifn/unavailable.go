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
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/functions/host/webhook"
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
	if err == nil || errors.Is(ctx.Err(), context.Canceled) || ownDeadline(ctx, err) || !storeDown(err) {
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

// ownDeadline reports whether err is the request's own deadline passing
// while the host did its own work (conformance-delay's hold, a wait), not
// a store call that got no answer: ctx ran out of its deadline, err says
// so, and err came of no AWS SDK call and wraps no ErrStoreUnavailable.
// Handle answers it deadlineExceeded, never the store's 503.
func ownDeadline(ctx context.Context, err error) bool {
	var call *smithy.OperationError
	return errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, idem.ErrStoreUnavailable) && !errors.As(err, &call)
}

// deadlineExceeded is the answer to a request whose own work outlived its
// deadline (ownDeadline): 503 runner_unavailable, the error registry's
// retriable code of a host that could not do the work now, with
// Retry-After. The handler returned an error, so Layer 1 recorded no
// response: the key stays retryable.
func (h *Handler) deadlineExceeded(keyed bool) events.APIGatewayV2HTTPResponse {
	msg := "The host did not finish the request within its deadline; retry the request after the Retry-After delay."
	if keyed {
		msg = "The host did not finish the request within its deadline; retry the request with the same Idempotency-Key after the Retry-After delay."
	}
	out := errResp(apierr.New(http.StatusServiceUnavailable, webhook.CodeRunnerUnavailable, "%s", msg))
	out.Headers[idem.HeaderRetryAfter] = strconv.Itoa(int(math.Max(1, math.Ceil(h.cfg.Guard.Config().InFlightRetryAfter.Seconds()))))
	return out
}

// storeDown reports whether err says a store could not be used.
func storeDown(err error) bool {
	return awserr.Unavailable(err) || errors.Is(err, idem.ErrStoreUnavailable)
}
