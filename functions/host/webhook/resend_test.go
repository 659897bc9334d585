package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/faultrx"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// A POST with a rewindable body and an Idempotency-Key header is
// "replayable" to net/http: on a reused keep-alive connection that the
// receiver resets (or closes) after reading the body, the transport sends
// it again by itself. This is the fault the webhook must never be exposed
// to; the test proves the receiver reproduces it.
func TestReceiverReproducesTransparentResend(t *testing.T) {
	for _, fault := range []faultrx.Fault{faultrx.ResetAfterBody, faultrx.CloseAfterBody} {
		rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(faultrx.Status503, fault, faultrx.OK)})
		c := &http.Client{Transport: &http.Transport{}}
		for i := 0; i < 2; i++ {
			req, _ := http.NewRequest(http.MethodPost, rx.URL(), bytes.NewReader([]byte(`{}`)))
			req.Header.Set("Idempotency-Key", "k")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("send %d: %v", i+1, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if n := rx.Count(); n != 3 {
			t.Fatalf("fault %+v: %d deliveries for 2 sends; the receiver does not reproduce the transparent re-send", fault, n)
		}
		rx.Close()
	}
}

// The webhook sends every byte under a recorded attempt: whatever the
// receiver does to the connection, the deliveries it counts equal the
// witness rows carrying a fire time, with the default client (fresh
// connection per request) and with a caller's keep-alive client (the body
// cannot be rewound).
func TestWebhookNeverResendsBehindTheLedger(t *testing.T) {
	faults := map[string]faultrx.Fault{"reset-after-body": faultrx.ResetAfterBody, "close-after-body": faultrx.CloseAfterBody}
	clients := map[string]func() *http.Client{
		"default":    func() *http.Client { return nil },
		"keep-alive": func() *http.Client { return &http.Client{Transport: &http.Transport{}} },
	}
	for fname, fault := range faults {
		for cname, client := range clients {
			for _, closeIdle := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/closeIdle=%v", fname, cname, closeIdle), func(t *testing.T) {
					rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(faultrx.Status503, fault, faultrx.OK), CloseIdle: closeIdle})
					defer rx.Close()
					l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
					if err != nil {
						t.Fatal(err)
					}
					w := &Webhook{Ledger: l, Policy: WebhookPolicy{AllowLoopback: true}, Client: client(), Backoff: time.Millisecond, WaitInline: time.Second}
					in, _ := json.Marshal(map[string]any{"url": rx.URL() + "/hook", "payload": map[string]any{"n": 1}})
					run := runs.NewRun("acme", WorkflowWebhook, in, time.Now())
					if _, err := w.Deliver(context.Background(), run); err != nil {
						t.Fatalf("deliver: %v", err)
					}
					p, err := l.Witness(context.Background(), run.ID)
					if err != nil {
						t.Fatal(err)
					}
					fired := 0
					for _, r := range p.Effects {
						if r.Fired && !r.FiredAt.IsZero() {
							fired++
						}
					}
					if n := rx.Count(); n != fired || n != 3 {
						t.Fatalf("receiver counted %d deliveries, witness has %d rows with a fire time (%+v); want 3 and 3", n, fired, p.Effects)
					}
					for _, d := range rx.Deliveries() {
						if d.Key != p.Effects[0].ProviderKey {
							t.Fatalf("delivery %d key %q, witness providerKey %q", d.N, d.Key, p.Effects[0].ProviderKey)
						}
					}
				})
			}
		}
	}
}
