package idem

import (
	"context"
	"errors"
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
