package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestRetriedRunIsANewEffectUnlessBusinessKeyed pins what functions/README
// says of retryRun for the webhook workflow: a retry is a new run of the
// same inputs. Without inputs.businessKey its effect is keyed on the run, so
// the retry is a new effect: the delivery is sent again, under another
// Idempotency-Key. With one, the retry resolves the failed run's effect and
// is answered its recorded outcome without a request: a recorded failure
// (here a 400) or spent tries (here a 503 on the one try allowed).
func TestRetriedRunIsANewEffectUnlessBusinessKeyed(t *testing.T) {
	for _, tc := range []struct {
		name, businessKey string
		status            int
		wantKeys          int
	}{
		{"keyless/400", "", http.StatusBadRequest, 2},
		{"keyless/503", "", http.StatusServiceUnavailable, 2},
		{"business-keyed/400", "order-7", http.StatusBadRequest, 1},
		{"business-keyed/503", "order-7", http.StatusServiceUnavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				w.WriteHeader(tc.status)
			}))
			defer srv.Close()
			l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
			if err != nil {
				t.Fatal(err)
			}
			w := &Webhook{Ledger: l, Policy: WebhookPolicy{AllowLoopback: true}, MaxTries: 1}
			in := map[string]any{"url": srv.URL, "payload": map[string]any{"a": 1}}
			if tc.businessKey != "" {
				in["businessKey"] = tc.businessKey
			}
			raw, _ := json.Marshal(in)
			failed := runs.NewRun("acme", WorkflowWebhook, raw, time.Now())
			retry := runs.NewRun("acme", WorkflowWebhook, raw, time.Now()) // retryRun: a new run, same inputs
			for _, r := range []runs.Run{failed, retry} {
				_, err := w.Deliver(context.Background(), r)
				var fe *ledger.FailedError
				if !errors.As(err, &fe) && !errors.Is(err, ErrRetriesExhausted) {
					t.Fatalf("run %s: %v, want a failure", r.ID, err)
				}
			}
			if len(keys) != tc.wantKeys {
				t.Fatalf("%d requests %v, want %d", len(keys), keys, tc.wantKeys)
			}
			if len(keys) == 2 && keys[0] == keys[1] {
				t.Fatalf("the retried run's delivery came under the failed run's key %s", keys[0])
			}
		})
	}
}
