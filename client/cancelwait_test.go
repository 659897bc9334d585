package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A caller that cancels its call as a wait between attempts ends gets no
// further attempt: the wait's timer and the context's end can be ready at
// once (the default Sleep's select then picks either), and a base
// RoundTripper that does not look at the context (an in-process handler,
// a Lambda invoker) would send the retry after the caller cancelled, and
// the call would go on to its last attempt and hand back an answer. The
// Sleep here ends its wait and cancels in one step, as that race does.
// Before, every one of the 5 attempts was sent and the call returned the
// last answer with no error (RED_TEAM 481).
func TestNoAttemptAfterTheCallerCancelsAsAWaitEnds(t *testing.T) {
	sent := 0
	base := rtFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := NewTransport(Config{Base: base, Sleep: func(context.Context, time.Duration) error {
		cancel() // the caller cancels as the wait's timer fires
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.example/orders", strings.NewReader(`{"a":1}`))
	resp, err := tr.RoundTrip(req)
	var ce *Error
	if resp != nil || !errors.As(err, &ce) || !errors.Is(err, context.Canceled) || ce.Attempts != 1 || ce.Key == "" {
		t.Fatalf("resp %v err %v; want the context's error after 1 attempt", resp, err)
	}
	if sent != 1 {
		t.Fatalf("%d attempts sent; want 1 (none after the caller cancelled)", sent)
	}
}
