package idem

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"

	"github.com/idemkit/idemkit/internal/apierr"
)

// Store implementations signal unavailability by wrapping
// ErrStoreUnavailable (declared beside the event errors): a call that was
// throttled, got a 5xx, could not connect or got no answer within its
// context's deadline. idem/dynamostore does so for every DynamoDB call;
// a store of your own should too, so that clients get a 503 with
// Retry-After rather than a 500.

// storeUnavailable reports whether err, returned by a Store call, means
// the store could not be used (as opposed to an answer such as ErrFenced):
// it wraps ErrStoreUnavailable, or the call ran out of its deadline.
func storeUnavailable(err error) bool {
	return errors.Is(err, ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// unavailable is the Guard's answer when the store cannot be used: 503
// CodeStoreUnavailable with Retry-After (Config.InFlightRetryAfter, whole
// seconds), in the policy's error body; counted in MetricStoreUnavailable.
func (t *txn) unavailable() *Response {
	t.g.count(MetricStoreUnavailable, "")
	r := t.fail(apierr.New(503, CodeStoreUnavailable,
		"The idempotency store is unavailable; retry the request with the same Idempotency-Key after the Retry-After delay."))
	r.Headers[HeaderRetryAfter] = []string{strconv.Itoa(int(math.Ceil(t.g.cfg.InFlightRetryAfter.Seconds())))}
	return r
}

// misconfigured is the Guard's answer to a request it cannot serve because
// of how it is wired: 500 CodeServerConfiguration, not retryable by the
// caller.
func misconfigured(what string) *apierr.Error {
	return apierr.New(500, CodeServerConfiguration,
		"The server is misconfigured (%s); retrying will not help.", what)
}

// clientGone reports whether err, from a store call or the handler, came
// of the client hanging up: the request's context ctx was cancelled (not
// timed out: a deadline is the store's or the function's, and stays
// storeUnavailable's).
func clientGone(ctx context.Context, err error) bool {
	return err != nil && errors.Is(ctx.Err(), context.Canceled)
}

// clientClosed is the Guard's answer to a request whose client hung up:
// StatusClientClosed CodeClientClosed, counted (MetricClientCancelled) and
// logged at info with the stage it was in; never the store's 503.
func (t *txn) clientClosed(ctx context.Context, stage string) *Response {
	t.g.count(MetricClientCancelled, "")
	t.logf(ctx, slog.LevelInfo, "idempotency: client cancelled", slog.String("stage", stage))
	return t.fail(apierr.New(StatusClientClosed, CodeClientClosed,
		"The client closed the request before it was answered; retry it with the same Idempotency-Key."))
}

// storeMisconfigured is the Guard's answer when the store says its table
// is missing or has another key schema (ErrStoreMisconfigured): every such
// request is counted (MetricStoreMisconfigured) and answered 500
// CodeServerConfiguration without Retry-After, since a retry with the same
// key meets the same table; the error and what to fix are logged once per
// Guard, not once per request.
func (t *txn) storeMisconfigured(ctx context.Context, err error) *Response {
	t.g.count(MetricStoreMisconfigured, "")
	if t.g.storeWarned.CompareAndSwap(false, true) {
		t.g.log.LogAttrs(ctx, slog.LevelError,
			"idempotency: the store's table is missing or has another key schema; every keyed request is refused until it is fixed: "+
				"point the store at the table created from template.yaml's IdempotencyTable (IDEMPOTENCY_TABLE), or create it "+
				"(idemkit tables create), and run idemkit doctor to see how the deployed table differs",
			t.attrs(t.errText(err))...)
	}
	return t.fail(misconfigured("the idempotency store's table is missing or has another key schema"))
}
