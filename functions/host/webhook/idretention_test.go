package webhook

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// TestRetryOutlivesTheTimestampTolerance (RED_TEAM 444): a retry of one
// effect carries the first try's webhook-id under a new timestamp, and may
// come long after the receiver's timestamp tolerance (5 minutes by the
// libraries' default) has passed since the first try, up to the delivery's
// retry budget. A receiver that keeps the ids it has seen only as long as
// its tolerance (all that replay protection needs) has forgotten the first
// try's id by then and acts on the retry again. SECURITY.md's receiver
// steps must say how long to keep them.
func TestRetryOutlivesTheTimestampTolerance(t *testing.T) {
	const tolerance = 5 * time.Minute
	r := newSignRig(t, &secretsOf{m: map[string][]string{"acme": {acmeSecret}}}, http.StatusServiceUnavailable)
	r.w.Backoff, r.w.MaxBackoff = 20*time.Minute, 20*time.Minute
	run := r.run(t, "acme")
	_, err := r.w.Deliver(context.Background(), run)
	var later *ledger.RetryLaterError
	if !errors.As(err, &later) {
		t.Fatalf("first try: %v, want a retry later", err)
	}
	first := r.clk.Now()
	r.clk.Advance(later.At.Sub(first))
	if _, err := r.w.Deliver(context.Background(), run); err != nil {
		t.Fatalf("second try: %v", err)
	}
	got := r.deliveries()
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want 2", len(got))
	}
	ts0, _ := strconv.ParseInt(got[0].h.Get("webhook-timestamp"), 10, 64)
	ts1, _ := strconv.ParseInt(got[1].h.Get("webhook-timestamp"), 10, 64)
	if !verifyStandardWebhook(acmeSecret, got[1].h, got[1].body) || got[1].h.Get("webhook-id") != got[0].h.Get("webhook-id") ||
		time.Duration(ts1-ts0)*time.Second <= tolerance {
		t.Fatalf("the retry: id %q after %q, %ds later; want the same id, verifying, beyond the tolerance",
			got[1].h.Get("webhook-id"), got[0].h.Get("webhook-id"), ts1-ts0)
	}
	doc, err := os.ReadFile("../../../docs/SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(doc), "### 8. Webhook signatures")
	sec, _, _ = strings.Cut(sec, "\n### ")
	steps := strings.Join(strings.Fields(sec), " ")
	if !strings.Contains(steps, "keeps each `webhook-id` it has acted on for at least the sender's retry budget") ||
		!strings.Contains(steps, "`WEBHOOK_RETRY_BUDGET_SECONDS`") {
		t.Fatal("SECURITY.md's receiver steps do not say how long to keep the webhook-ids it deduplicates by: " +
			"a receiver keeping them for its tolerance alone acts on a retry twice")
	}
}
