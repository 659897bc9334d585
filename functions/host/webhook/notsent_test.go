package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// TestWebhookTryThatNeverSentIsReleased: a try whose request never left
// the host is released, not escaped (the witness must not say the
// provider may have it, and under fenced-effects an escaped attempt stops
// every later try until an operator resolves it): a TLS handshake the
// receiver's certificate fails, and one the receiver never completes (the
// handshake timeout), as well as a refused connection. The receiver gets
// no request.
func TestWebhookTryThatNeverSentIsReleased(t *testing.T) {
	var hits atomic.Int32
	badCert := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer badCert.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers the ClientHello
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String() + "/"
	refused.Close()
	for name, u := range map[string]string{
		"certificate": badCert.URL,
		"handshake":   "https://" + silent.Addr().String() + "/",
		"refused":     refusedURL,
	} {
		t.Run(name, func(t *testing.T) {
			w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
			w.Timeout = 500 * time.Millisecond
			_, err := w.Deliver(context.Background(), webhookRun(t, u))
			var ex *ledger.AttemptsExhaustedError
			if !errors.As(err, &ex) {
				t.Fatalf("%v, want the tries exhausted", err)
			}
			if ex.Escaped {
				t.Fatalf("a try that sent nothing was recorded escaped: %v", err)
			}
		})
	}
	if hits.Load() != 0 {
		t.Fatalf("the receiver got %d requests", hits.Load())
	}
}
