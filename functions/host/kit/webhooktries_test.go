package kit_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// TestWebhookMaxTriesAboveTheLedgersDefaultCap: WEBHOOK_MAX_TRIES takes
// 1..500 and is the webhook delivery's attempt cap. The kit's ledger must
// not cap it lower (its own default cap is 50): a delivery configured for
// 120 tries is recorded, and retried, with a cap of 120, on every engine.
func TestWebhookMaxTriesAboveTheLedgersDefaultCap(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		defer recv.Close()
		const tries = 120
		env := settings.Env{RunsTable: e.CreateTable(t, "RunsTable"), EffectsTable: e.CreateTable(t, "EffectsTable"),
			CrossRegion: settings.CrossRegionSingle, Webhook: webhook.WebhookPolicy{AllowLoopback: true},
			EffectLease: time.Minute, EffectRetention: 14 * 24 * time.Hour, WebhookMaxTries: tries, WebhookBudget: time.Hour}
		quiet := slog.New(slog.NewJSONHandler(io.Discard, nil))
		k, err := kit.NewKit(kit.Config{Env: env, Client: e.Client(), Parts: kit.Parts{Runs: true, Ledger: true}, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(map[string]any{"url": recv.URL, "payload": 1})
		run := runs.NewRun("acme", webhook.WorkflowWebhook, in, time.Now())
		_, err = k.Webhook.Deliver(context.Background(), run)
		var later *ledger.RetryLaterError
		if !errors.As(err, &later) {
			t.Fatalf("a 503: %v, want a retry scheduled", err)
		}
		if later.MaxAttempts != tries {
			t.Fatalf("attempt 1 of %d, want of %d (WEBHOOK_MAX_TRIES)", later.MaxAttempts, tries)
		}
		v, err := k.Ledger.ShowEffect(context.Background(), later.EffectID)
		if err != nil || v.MaxAttempts != tries {
			t.Fatalf("the effect record's cap %d (%v), want %d", v.MaxAttempts, err, tries)
		}
	})
}
