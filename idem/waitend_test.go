package idem_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// TestWaitEndingDuringAPollIsNotAStoreFailure: a duplicate whose wait for
// the in-flight original runs out while a poll is still out (the poll's
// deadline is the wait's end, not the store timeout) answers 409
// idempotency_in_flight, and logs that the wait ended — at debug, never a
// WARN that the idempotency store is unavailable, which it is not.
func TestWaitEndingDuringAPollIsNotAStoreFailure(t *testing.T) {
	s := newStallStore()
	logs := &syncBuffer{}
	g := stallGuard(t, s, func(c *idem.Config) {
		c.Wait = time.Millisecond
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	block, running := make(chan struct{}), make(chan struct{})
	h := &handler{block: block, before: func(context.Context) { close(running) }}
	ev := v2event("POST", "POST /runs", testKey, `{}`)
	first := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() { r, _ := g.HTTPAPI(h.v2)(context.Background(), ev); first <- r }()
	<-running
	s.mu.Lock()
	s.stall["Get"] = true // every poll outlasts the wait
	s.mu.Unlock()
	dup := answerWithin(t, func() events.APIGatewayV2HTTPResponse {
		r, _ := g.HTTPAPI(h.v2)(context.Background(), ev)
		return r
	})
	close(block)
	if r := <-first; r.StatusCode != 201 {
		t.Fatalf("first: %d", r.StatusCode)
	}
	if dup.StatusCode != 409 || !strings.Contains(dup.Body, "idempotency_in_flight") {
		t.Fatalf("duplicate: %d %s", dup.StatusCode, dup.Body)
	}
	out := logs.String()
	if strings.Contains(out, "poll failed") || strings.Contains(out, `"level":"WARN"`) || strings.Contains(out, `"level":"ERROR"`) {
		t.Errorf("the wait's end logged as a failure:\n%s", out)
	}
	if !strings.Contains(out, "idempotency: the wait for the in-flight request ended") {
		t.Errorf("the wait's end is not logged:\n%s", out)
	}
}
