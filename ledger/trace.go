package ledger

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The spans a Ledger records through Config.TracerProvider (the
// OpenTelemetry API only; no SDK is linked), siblings under the caller's
// span: the claim (Do's decision: claimed, reclaimed, replay, in flight,
// …), the provider call (the effect function) and the record (the outcome
// written). Each carries the effect's keying, the attempt and the outcome,
// never the effect id or the provider key; a failure that is not one of
// Do's answers sets the span's status to Error.
const (
	tracerName   = "github.com/idemkit/idemkit/ledger"
	spanClaim    = "idemkit.ledger.claim"
	spanProvider = "idemkit.ledger.provider_call"
	spanRecord   = "idemkit.ledger.record"

	attrKeying  = "idemkit.keying"
	attrAttempt = "idemkit.attempt"
	attrOutcome = "idemkit.outcome"
)

// tracer returns the Ledger's tracer: Config.TracerProvider's, or nil
// without one (a span then costs nothing: no context, no attribute, no
// outcome classified).
func tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// span is one of the Ledger's spans; end is idempotent.
type span struct {
	s     trace.Span
	ended bool
}

// noSpan is every span of a Ledger without a TracerProvider: it never
// records, so ending it changes nothing and it can be shared.
var noSpan = &span{}

func (l *Ledger) span(ctx context.Context, name string, eff Effect) (context.Context, *span) {
	if l.tracer == nil {
		return ctx, noSpan
	}
	ctx, s := l.tracer.Start(ctx, name, trace.WithAttributes(attribute.String(attrKeying, string(eff.Identity.Keying))))
	return ctx, &span{s: s}
}

// recording reports whether end would record anything (false for noSpan
// and for a span already ended): callers test it before working out end's
// arguments.
func (s *span) recording() bool { return s.s != nil && !s.ended }

// end ends the span with its attempt (when known), outcome and, for err
// not one of Do's answers, an error status.
func (s *span) end(attempt int, outcome string, err error) {
	if !s.recording() {
		return
	}
	s.ended = true
	if attempt > 0 {
		s.s.SetAttributes(attribute.String(attrAttempt, strconv.Itoa(attempt)))
	}
	s.s.SetAttributes(attribute.String(attrOutcome, outcome))
	if err != nil && outcome == "error" {
		// The error's text may name the effect: the status says only what
		// failed (the logs of the caller carry the rest).
		s.s.SetStatus(codes.Error, "ledger: the call failed")
	}
	s.s.End()
}

// answerOutcome names Do's result for a span: an answer of the protocol,
// or "error".
func answerOutcome(res Result, err error) string {
	var inflight *InFlightError
	var mismatch *MismatchError
	var later *RetryLaterError
	var exhausted *AttemptsExhaustedError
	var failed *FailedError
	switch {
	case err == nil && res.Replayed:
		return "replay"
	case err == nil:
		return "completed"
	case errors.As(err, &failed) && failed.Replayed:
		return "replay"
	case errors.As(err, &failed):
		return "failed"
	case errors.As(err, &inflight):
		return "in-flight"
	case errors.As(err, &mismatch):
		return "mismatch"
	case errors.As(err, &later):
		return "retry-later"
	case errors.As(err, &exhausted):
		return "exhausted"
	case errors.Is(err, ErrNotSent):
		return "not-sent"
	case errors.Is(err, ErrUncertain):
		return "escaped"
	}
	return "error"
}

// The claim span's outcomes when the claim is won.
const (
	outcomeClaimedSpan   = "claimed"
	outcomeReclaimedSpan = "reclaimed"
)

// providerOutcome is the effect function's error as Do would classify it:
// nil, ErrNotSent, ErrUncertain, or a *FailedError (the provider answered
// with a failure that is recorded).
func providerOutcome(ferr error) error {
	if ferr == nil || errors.Is(ferr, ErrNotSent) || errors.Is(ferr, ErrUncertain) {
		return ferr
	}
	return &FailedError{Cause: ferr}
}
