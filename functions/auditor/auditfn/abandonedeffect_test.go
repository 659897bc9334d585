package auditfn

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// TestAbandonedEffectClaimDeletedByTTLDoesNotPage: an effect record left
// claimed (its owner stopped before the point of no return: the provider
// was never called under that claim) whose lease ended before TTL deleted
// it at the end of its retention was abandoned, as a completed record
// expiring is no event: a later claim of the effect would have taken it
// over anyway. It must not page STACK-ttl-expired-pending, whose runbook
// (raise EffectRetentionDays) cannot stop an abandoned claim from expiring
// unfinished. A firing record (the provider may have acted: an escape
// nobody labelled), a claim whose lease still held, and one naming no
// lease are counted.
func TestAbandonedEffectClaimDeletedByTTLDoesNotPage(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	deleted := t0.Add(ledger.MinRetention + time.Hour)
	for _, tc := range []struct {
		name  string
		state ledger.State
		lease time.Time
		want  int
	}{
		{"claimed, lease ended at the claim's minute", ledger.StateClaimed, t0.Add(time.Minute), 0},
		{"claimed, lease still held", ledger.StateClaimed, deleted.Add(time.Minute), 1},
		{"firing, lease ended", ledger.StateFiring, t0.Add(time.Minute), 1},
		{"claimed, no lease named", ledger.StateClaimed, time.Time{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &ledger.Record{Key: "effect#e-abandoned", EffectID: "e-abandoned", State: tc.state, Owner: "owner-1", Attempt: 1,
				CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: tc.lease,
				Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptClaimed, At: t0, Fired: tc.state == ledger.StateFiring, FiredAt: t0}}}
			m, err := ledgerdynamo.EncodeRecord(rec)
			if err != nil {
				t.Fatal(err)
			}
			var metrics, logs bytes.Buffer
			a := &Auditor{Metrics: emf.New(&metrics, "idemkit"), Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				Now: func() time.Time { return deleted.Add(time.Hour) }}
			c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "REMOVE", EventID: "1", OldImage: m, Created: deleted,
				PrincipalID: stream.TTLPrincipal, IdentityType: "Service"}})
			if got := c.TTLExpiredPending[TableEffects]; got != tc.want {
				t.Errorf("ttl_expired_pending = %d, want %d", got, tc.want)
			}
			if got := strings.Contains(metrics.String(), MetricTTLPending); got != (tc.want == 1) {
				t.Errorf("metric %s emitted = %v, want %v", MetricTTLPending, got, tc.want == 1)
			}
			if tc.want == 0 && !strings.Contains(logs.String(), "audit: TTL deleted an abandoned effect claim") {
				t.Errorf("the abandoned claim's deletion is not logged: %s", logs.String())
			}
		})
	}
}
