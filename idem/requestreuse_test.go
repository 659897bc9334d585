package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// keepingStore is the memory store that keeps the context of every Claim
// call, as a store may (a call's context is usable after the call has
// ended: its deadline stays, and it is done).
type keepingStore struct {
	idem.Store
	ctxs []context.Context
}

func (s *keepingStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	s.ctxs = append(s.ctxs, ctx)
	return s.Store.Claim(ctx, rec, now)
}

// echoKeyHandler answers with the request's key in its body and a header,
// so that the answers of two keys differ.
func echoKeyHandler(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	k := ev.Headers["idempotency-key"]
	return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json", "X-Key": k}, Body: `{"key":"` + k + `"}`}, nil
}

// TestReplayReuseLeavesStoreCallContextsAlone: Do reuses the request of a
// straight replay for a later request, but never the storage of the
// claim's store call context, which a store may read after the call: a
// kept context's deadline stays its own call's, and it stays done, however
// many requests follow (each a call with a later deadline).
func TestReplayReuseLeavesStoreCallContextsAlone(t *testing.T) {
	st := &keepingStore{Store: memstore.New()}
	g, err := idem.New(idem.Config{Store: st, Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := g.HTTPAPI(echoKeyHandler)
	ctx := context.Background()
	ev := v2event("POST", "POST /runs", testKey, body1KB())
	if r, _ := h(ctx, ev); r.StatusCode != 201 {
		t.Fatalf("first execution: %d %s", r.StatusCode, r.Body)
	}
	if r, _ := h(ctx, ev); r.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("replay: %d %v", r.StatusCode, r.Headers)
	}
	kept := st.ctxs[len(st.ctxs)-1]
	deadline, ok := kept.Deadline()
	if !ok {
		t.Fatal("a store call's context has no deadline")
	}
	for i := range 200 {
		// Replays and first executions of other keys, whose claims
		// have later deadlines.
		other := v2event("POST", "POST /runs", fmt.Sprintf("k_%022d", i%20), body1KB())
		h(ctx, other)
		if r, _ := h(ctx, ev); r.StatusCode != 201 {
			t.Fatalf("replay %d: %d", i, r.StatusCode)
		}
	}
	if d, _ := kept.Deadline(); !d.Equal(deadline) {
		t.Errorf("a kept store call context's deadline moved from %v to %v: its storage went to another request", deadline, d)
	}
	if err := kept.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("a kept store call context after its call: Err %v, want context.Canceled", err)
	}
	select {
	case <-kept.Done():
	default:
		t.Error("a kept store call context after its call is not done")
	}
}

// TestReplayAnswerOutlivesReuse: an answer Do returned, a replay's
// included, holds nothing of a request Do reuses: later requests of other
// keys, with other answers, leave it as it was.
func TestReplayAnswerOutlivesReuse(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := g.HTTPAPI(echoKeyHandler)
	ctx := context.Background()
	ev := v2event("POST", "POST /runs", testKey, body1KB())
	h(ctx, ev)
	first, _ := h(ctx, ev)
	if first.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("replay: %d %v", first.StatusCode, first.Headers)
	}
	body, headers := first.Body, maps.Clone(first.Headers)
	for i := range 200 {
		other := v2event("POST", "POST /runs", fmt.Sprintf("k_%022d", i%20), body1KB())
		h(ctx, other)
	}
	if first.Body != body || !maps.Equal(first.Headers, headers) {
		t.Errorf("a replay's answer changed after later requests: body %q headers %v, was %q %v", first.Body, first.Headers, body, headers)
	}
}
