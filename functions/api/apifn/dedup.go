package apifn

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/internal/jcs"
)

// HeaderDedup is createRun's scope-dedup request header; its one value is
// DedupEnforce.
const (
	HeaderDedup  = "OpenWOP-Dedup"
	DedupEnforce = "enforce"
)

// dedupScope returns the scope a createRun holds: the body's scopeId when
// the request sends `OpenWOP-Dedup: enforce` and a scopeId, else "" (the
// create is unscoped, exactly as without the header). Under enforce a
// scopeId that is not a string of 1 to runs.MaxScopeIDBytes bytes of
// Unicode text (no lone surrogate escape, no invalid UTF-8) is 400
// validation_error (details.field "scopeId"); a header value other than
// enforce is 400 validation_error naming the header.
func dedupScope(ev events.APIGatewayV2HTTPRequest, req webhook.CreateRequest) (string, *apierr.Error) {
	vs := header.Values(ev.Headers, HeaderDedup)
	if len(vs) == 0 {
		return "", nil
	}
	if len(vs) > 1 || strings.TrimSpace(vs[0]) != DedupEnforce {
		return "", apierr.New(http.StatusBadRequest, apierr.CodeValidation, "%s accepts one value, %q", HeaderDedup, DedupEnforce).
			WithDetails(map[string]any{"field": HeaderDedup})
	}
	if req.ScopeID == nil {
		return "", nil
	}
	// jcs.Canonicalize refuses what json.Unmarshal would read lossily (a
	// lone surrogate escape or bytes that are not UTF-8 read as U+FFFD, so
	// distinct scopeIds would name one scope); a keyed request's body was
	// already refused for it by the Layer-1 guard, an unkeyed one is here.
	var s string
	if _, err := jcs.Canonicalize(req.ScopeID); err != nil || json.Unmarshal(req.ScopeID, &s) != nil || !runs.ValidScopeID(s) {
		return "", apierr.New(http.StatusBadRequest, apierr.CodeValidation,
			"under %s: %s, scopeId must be a non-empty string of at most %d bytes", HeaderDedup, DedupEnforce, runs.MaxScopeIDBytes).
			WithDetails(map[string]any{"field": "scopeId"})
	}
	return s, nil
}

// scopeHeldResp is the answer to a create refused because a live run of
// the tenant holds its scope: 409 run_already_active with Retry-After
// runs.ScopeRetryAfter (5 seconds). The guard forgets it (the
// idempotency policies' Cache): a later request with the same
// Idempotency-Key runs afresh, and creates its run once the holder ended.
func scopeHeldResp() events.APIGatewayV2HTTPResponse {
	r := errResp(apierr.New(http.StatusConflict, apierr.CodeRunAlreadyActive,
		"a live run of this tenant already holds this scopeId; retry after it ends"))
	r.Headers["Retry-After"] = strconv.Itoa(int(runs.ScopeRetryAfter.Seconds()))
	return r
}

// scopeHeldAnswer is createRun's answer (idem.OnConflict) to the cause of
// a completion transaction cancelled by its run's write: where the run
// commits with the completion (runs.DynamoRuns.Transactional), a takeover
// of the scope may fence the run's id after every check passed, and the
// run's Put then cancels the transaction with a *runs.ScopeHeldError as
// its cause. The answer is the one a create refused before its write gets,
// scopeHeldResp (forgotten, as it is), never a 500. Nil for any other
// cause: the Guard's own answer stands.
func scopeHeldAnswer(cause error) *idem.Response {
	if !errors.Is(cause, runs.ErrScopeHeld) {
		return nil
	}
	return conflictAnswer(scopeHeldResp())
}

// conflictAnswer is r as the idem.Response an idem.OnConflict answer
// returns (scopeHeldAnswer, retryLimitAnswer): its status, its headers
// under their canonical names, its body.
func conflictAnswer(r events.APIGatewayV2HTTPResponse) *idem.Response {
	h := make(map[string][]string, len(r.Headers))
	for k, v := range r.Headers {
		h[http.CanonicalHeaderKey(k)] = []string{v}
	}
	return &idem.Response{Status: r.StatusCode, Headers: h, Body: []byte(r.Body)}
}
