package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestWebhookRequestTimeoutIsTriedAgain: a receiver's "408 Request
// Timeout" says it did not receive the whole request in the time it was
// prepared to wait, and invites the sender to repeat it (RFC 9110
// §15.5.9): the try is retried under the same Idempotency-Key, as a 429 or
// 5xx is, not recorded as the delivery's final failure.
func TestWebhookRequestTimeoutIsTriedAgain(t *testing.T) {
	var (
		mu   sync.Mutex
		keys []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
	w.MaxTries = 3
	if _, err := w.Deliver(context.Background(), webhookRun(t, srv.URL+"/")); err != nil {
		t.Fatalf("a 408 then a 200: %v, want the delivery's success", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("the receiver got keys %q, want the same key twice", keys)
	}
}
