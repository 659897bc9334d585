package testutil

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Spans is a tiny recording OpenTelemetry TracerProvider for tests: it
// keeps every ended span's name, attributes and status, so a test can check
// what a library traces without linking the OpenTelemetry SDK. Safe for
// concurrent use.
type Spans struct {
	noop.TracerProvider
	mu    sync.Mutex
	ended []Span
}

// Span is an ended span as recorded.
type Span struct {
	Name   string
	Attrs  map[string]string
	Error  bool   // the status was codes.Error
	Status string // the status description
}

// Tracer implements trace.TracerProvider.
func (s *Spans) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return spanTracer{Tracer: noop.Tracer{}, s: s}
}

// Ended returns the spans ended so far, in the order they ended.
func (s *Spans) Ended() []Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Span(nil), s.ended...)
}

// Names returns the names of the spans ended so far, in order.
func (s *Spans) Names() []string {
	var out []string
	for _, sp := range s.Ended() {
		out = append(out, sp.Name)
	}
	return out
}

type spanTracer struct {
	noop.Tracer
	s *Spans
}

func (t spanTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, base := t.Tracer.Start(ctx, name, opts...)
	sp := &recSpan{Span: base, s: t.s, rec: Span{Name: name, Attrs: map[string]string{}}}
	cfg := trace.NewSpanStartConfig(opts...)
	sp.SetAttributes(cfg.Attributes()...)
	return trace.ContextWithSpan(ctx, sp), sp
}

type recSpan struct {
	trace.Span
	s   *Spans
	mu  sync.Mutex
	rec Span
}

func (r *recSpan) IsRecording() bool { return true }

func (r *recSpan) SetAttributes(kv ...attribute.KeyValue) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range kv {
		r.rec.Attrs[string(a.Key)] = a.Value.String()
	}
}

func (r *recSpan) SetStatus(code codes.Code, description string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Error, r.rec.Status = code == codes.Error, description
}

func (r *recSpan) End(...trace.SpanEndOption) {
	r.mu.Lock()
	rec := r.rec
	r.mu.Unlock()
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.ended = append(r.s.ended, rec)
}
