package idem

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The spans a Guard records through Config.TracerProvider (the
// OpenTelemetry API only; no SDK is linked): one per claim, per completion
// and per replay of a keyed request. Each carries the operation, the key's
// keyed hash (never the key) and the outcome; a failed store call sets the
// span's status to Error.
const (
	tracerName   = "github.com/idemkit/idemkit/idem"
	spanClaim    = "idemkit.idempotency.claim"
	spanComplete = "idemkit.idempotency.complete"
	spanReplay   = "idemkit.idempotency.replay"

	attrOperation = "idemkit.operation"
	attrKeyHash   = "idemkit.key_hash"
	attrOutcome   = "idemkit.outcome"
)

// tracer returns the Guard's tracer: Config.TracerProvider's, or nil
// without one (span then costs nothing: no attribute, no key hash).
func tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// noSpan is the span of a Guard without a TracerProvider.
var noSpan trace.Span = noop.Span{}

// span starts a span of the request's.
func (t *txn) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if t.g.tracer == nil {
		return ctx, noSpan
	}
	return t.g.tracer.Start(ctx, name, trace.WithAttributes(
		attribute.String(attrOperation, t.op),
		attribute.String(attrKeyHash, t.g.hash(t.key)),
	))
}

// endSpan ends span with the outcome and, for a failed call, its error
// (the text redacted like a log line's).
func (t *txn) endSpan(span trace.Span, outcome string, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if outcome != "" {
		span.SetAttributes(attribute.String(attrOutcome, outcome))
	}
	if err != nil {
		span.SetStatus(codes.Error, t.errText(err).Value.String())
	}
	span.End()
}

// claimSpanOutcome is the claim span's outcome: the decision, or why the
// claim failed. A record that exists is decided after the claim (replay,
// mismatch, in flight: the request's log lines and metrics say which).
func claimSpanOutcome(res ClaimResult, err error) string {
	switch {
	case err != nil:
		return storeOutcome(err).Value.String()
	case res.Decision == Claimed:
		return OutcomeClaimed
	case res.Decision == Reclaimed:
		return OutcomeReclaimed
	}
	return "exists"
}

// completeSpanOutcome is the completion span's outcome.
func completeSpanOutcome(err error) string {
	switch {
	case err == nil:
		return "completed"
	case errors.Is(err, ErrFenced):
		return logOutcomeLeaseLost
	}
	return storeOutcome(err).Value.String()
}
