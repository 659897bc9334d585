package idem

import (
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/contentcoding"
	"github.com/idemkit/idemkit/internal/header"
)

// The metric names (Metrics.Count) and the outcomes of
// MetricClaimOutcomes.
const (
	// Metric names (CloudWatch EMF, via internal/emf). Dimensions are bounded:
	// MetricClaimOutcomes carries only Outcome.

	// MetricClaimOutcomes counts claim outcomes, dimension Outcome: one of
	// OutcomeClaimed, OutcomeReclaimed, OutcomeReplay, OutcomeInFlight,
	// OutcomeMismatch.
	MetricClaimOutcomes = "idemkit.idempotency.claim_outcomes_total"
	// MetricReclaims counts lease reclaims, a metric that OpenWOP effect
	// identity, replay and split-brain safety defines: a claim that took over
	// a pending record whose lease had expired (ClaimResult.LeaseExpired).
	// The re-run of a retryable failure is not a reclaim in that sense
	// and is counted only as claim outcome "reclaimed".
	MetricReclaims = "openwop.idempotency.reclaims_total"
	// MetricLeaseLostWrites counts Layer-1 writes (complete, release, delete)
	// refused because the writer's lease was lost: the record had been
	// reclaimed by another invocation or had expired. It is not the
	// fence verdict openwop.idempotency.stale_fence_rejections_total, which
	// only the effect fence emits (ledger.MetricStaleFence).
	MetricLeaseLostWrites = "idemkit.idempotency.lease_lost_writes_total"
	// MetricClientCancelled counts requests whose client hung up (their
	// context cancelled) before the Guard answered: while the key was
	// claimed or waited on, or while the handler ran and failed for it.
	// They are answered CodeClientClosed, never counted as the store's
	// failure.
	MetricClientCancelled = "idemkit.idempotency.client_cancelled_total"
	// MetricStoreMisconfigured counts requests refused because the store
	// answered ErrStoreMisconfigured (a missing table, another key schema):
	// every such request, while the log says it once per Guard.
	MetricStoreMisconfigured = "idemkit.idempotency.store_misconfigured_total"
	// MetricStoreUnavailable counts requests answered 503
	// CodeStoreUnavailable because the store could not be used (throttled,
	// a 5xx, unreachable, or no answer within Config.StoreTimeout), at the
	// claim or at the completion. No dimensions. A steady rate means
	// callers are being turned away: look at the store, not the callers.
	MetricStoreUnavailable = "idemkit.idempotency.store_unavailable_total"

	// DimOutcome is MetricClaimOutcomes' one dimension.
	DimOutcome = "Outcome"

	// Claim outcomes (the Outcome dimension of MetricClaimOutcomes, and the
	// "outcome" log attribute).

	OutcomeClaimed   = "claimed"
	OutcomeReclaimed = "reclaimed"
	OutcomeReplay    = "replay"
	OutcomeInFlight  = "in-flight"
	OutcomeMismatch  = "mismatch"
)

// The outcomes only log lines carry (the "outcome" attribute of a line
// about a request that failed before or after its claim).
const (
	logOutcomeError            = "error"
	logOutcomeStoreUnavailable = "store-unavailable"
	logOutcomeHandlerError     = "handler-error"
	logOutcomeLeaseLost        = "lease-lost"
	logOutcomeMisconfigured    = "misconfigured"
	logOutcomeUnauthenticated  = "unauthenticated"
)

// storeOutcome is the "outcome" of a line about a failed store call.
func storeOutcome(err error) slog.Attr {
	if storeUnavailable(err) {
		return slog.String("outcome", logOutcomeStoreUnavailable)
	}
	return slog.String("outcome", logOutcomeError)
}

func (g *Guard) count(name string, outcome string) {
	if g.cfg.Metrics == nil {
		return
	}
	var dims map[string]string
	if outcome != "" {
		dims = map[string]string{DimOutcome: outcome}
	}
	g.cfg.Metrics.Count(name, 1, dims)
}

// envelopeCode returns the "error" member of resp's body read as a JSON
// error envelope, or "". A body that is not JSON as it stands but is sent
// with a content coding the standard library reads (Content-Encoding
// gzip, x-gzip or deflate, zlib or raw; several applied in order) is read
// decoded, up to maxEnvelopeBytes: a handler behind a compression
// middleware answers the same code as without it, so the policy's Cache
// forgets (or retries) its answer as it would the plain one. read is
// false when the body is in a coding the Guard could not undo (br, zstd,
// compress, or one that inflates past maxEnvelopeBytes): whatever code it
// carries is unknown, not absent (unreadCode).
func envelopeCode(resp *Response) (code string, read bool) {
	if code, ok := jsonCode(resp.Body); ok {
		return code, true
	}
	codings := strings.Join(header.ValuesMulti(resp.Headers, "Content-Encoding"), ",")
	if codings == "" || len(resp.Body) == 0 {
		return "", true
	}
	body, ok := contentcoding.Decode(resp.Body, codings, maxEnvelopeBytes)
	if !ok {
		return "", false
	}
	code, _ = jsonCode(body)
	return code, true
}

// knownCodes are the error codes the kit's policies tell apart (the
// OpenWOP registry's and idemkit's own): unreadCode asks the policy about
// each.
var knownCodes = [...]string{
	apierr.CodeIdempotencyKeyInvalid, apierr.CodeValidation, apierr.CodeUnauthenticated,
	apierr.CodeForbidden, apierr.CodeCredentialForbidden, apierr.CodeMockProviderForbidden,
	apierr.CodeIDTenantMismatch, apierr.CodeNotFound, apierr.CodeIdempotencyInFlight,
	apierr.CodeIdempotencyKeyMismatch, apierr.CodePayloadTooLarge, apierr.CodeUnsupportedMediaType,
	apierr.CodeRunTerminal, apierr.CodeRunAlreadyActive, apierr.CodeWebhookURLRejected,
	apierr.CodeCapabilityRequired, apierr.CodeResidencyUnavailable,
	CodeStoreUnavailable, CodeServerConfiguration, CodeClientClosed, CodeResponseNotKept,
}

// unreadCode is the disposition of an error answer of status whose body
// the Guard could not read (envelopeCode: read false), so that the
// decision never rests on a code nobody read: the policy's for the status
// with no code, unless the policy decides that status by its code (some
// known code gets another disposition), in which case the least final of
// its dispositions for the status: Retry if any is, else Forget. An
// answer the policy keeps whatever its code is kept; one it might not
// keep is never recorded as final on a guess. A policy that tells apart
// codes of its own (not knownCodes) is answered as for no code.
func unreadCode(cache func(int, string) Disposition, status int) Disposition {
	d := cache(status, "")
	if d == Retry {
		return Retry
	}
	for _, c := range knownCodes {
		switch cache(status, c) {
		case Retry:
			return Retry
		case Forget:
			d = Forget
		}
	}
	return d
}

// jsonCode returns the "error" member of body read as a JSON object;
// ok is false when body is not one.
func jsonCode(body []byte) (code string, ok bool) {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return "", false
	}
	return e.Error, true
}

// maxEnvelopeBytes bounds the decoded body envelopeCode reads: an error
// envelope is small, and a body that inflates past it is not read.
const maxEnvelopeBytes = 1 << 20
