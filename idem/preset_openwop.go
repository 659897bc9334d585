package idem

import (
	"time"

	"github.com/idemkit/idemkit/internal/apierr"
)

// The OpenWOP default policy (the OpenWOP v2 core spec): its key grammar,
// cache rule, replay header and error body. It is Config's default.
var (
	// PolicyOpenWOP is the OpenWOP default policy, Config's default: key
	// ^[A-Za-z0-9._~-]{22,128}$ (KeyOpenWOP); scope tenant + operation + key;
	// 2xx and final 4xx replayed, 408/429/499/5xx and 409 idempotency_in_flight retried, 400
	// idempotency_key_invalid/validation_error, 401, 403, 409 run_already_active and 422 residency_unavailable forgotten
	// (its Cache; a 400 is forgotten by its envelope code, read decoded when the body carries a gzip or deflate Content-Encoding, and forgotten when its coding is one the Guard cannot read); retention 24 h, the spec's minimum; replays carry
	// "OpenWOP-Idempotent-Replay: true"; in-flight Retry-After 1 s while the
	// owner is alive, the seconds until its lease can be reclaimed when it
	// looks dead; the OpenWOP error envelope {error, message, details?}
	// with the registry code (ErrorBody nil, the default).
	PolicyOpenWOP = Policy{
		Name:         "openwop",
		Key:          KeyOpenWOP,
		Scope:        ScopeParts{Operation: true},
		Cache:        cacheOpenWOP,
		Retention:    24 * time.Hour,
		MinRetention: 24 * time.Hour,
		Headers:      replayHeader(HeaderOpenWOPReplay),
		InFlight:     InFlightAnswer{RetryAfter: time.Second},
	}

	// KeyOpenWOP is the OpenWOP v2 grammar (the OpenWOP default policy):
	// ^[A-Za-z0-9._~-]{22,128}$.
	KeyOpenWOP = KeyPolicy{Name: "openwop", MinLen: 22, MaxLen: 128, Allow: Chars("A-Z", "a-z", "0-9", "._~-")}
)

// cacheOpenWOP is the OpenWOP default's Policy.Cache: 408, 429, 499 and
// 5xx are retried (never replayed; a 408 Request Timeout tells the client
// it may repeat the request, RFC 9110 §15.5.9, so replaying it would
// refuse the key's work forever, and a 499, a handler's answer to its
// client's hang-up, as grpc-gateway answers a cancelled call, says the
// request was cut short, its outcome unknown: RED_TEAM 430), and so is a
// 409 idempotency_in_flight (a handler passing on the answer of a service
// it forwarded the key to: "not yet", not retryable without waiting, which
// a replay would answer for the retention: RED_TEAM 431); 401, 403, a 400 whose envelope code is
// idempotency_key_invalid or validation_error, a 409 run_already_active
// (a create refused while another run holds its scope) and a 422
// residency_unavailable (retriable in the error registry) are forgotten (the request was rejected before any work, and a
// later request with the key runs afresh); every other outcome — 1xx..3xx
// and the other 4xx — is replayed.
func cacheOpenWOP(status int, code string) Disposition {
	switch {
	case status == 408 || status == 429 || status == StatusClientClosed || status >= 500:
		return Retry
	case status == 409 && code == apierr.CodeIdempotencyInFlight:
		return Retry // "not yet": a handler passing on another service's in-flight answer
	case status == 401 || status == 403:
		return Forget
	case status == 400 && (code == apierr.CodeIdempotencyKeyInvalid || code == apierr.CodeValidation):
		return Forget
	case status == 409 && code == apierr.CodeRunAlreadyActive:
		return Forget
	case status == 422 && code == apierr.CodeResidencyUnavailable:
		return Forget // the registry's one retriable 4xx below 429
	}
	return Replay
}

// openWOPErrorBody is the default Policy.ErrorBody: the OpenWOP envelope
// {error, message, details?} with the registry code.
func openWOPErrorBody(e ErrorInfo) []byte {
	return (&apierr.Error{Code: e.Code, Message: e.Message, Details: e.Details}).Body()
}
