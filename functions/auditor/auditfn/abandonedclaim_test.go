package auditfn

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/emf"
)

// TestAbandonedPendingRecordDeletedByTTLDoesNotPage: a Layer-1 record left
// pending by a request nobody retried (its invocation crashed or timed
// out, its lease long over) stays pending until TTL deletes it at the end
// of its retention. Its deletion changes nothing: a retry after the lease
// runs the handler again either way, and no handler still holds it. It
// must not be counted in idemkit.audit.ttl_expired_pending_total, which
// pages (STACK-ttl-expired-pending) and whose runbook says to raise the
// retention: no retention stops an abandoned claim from expiring pending,
// so every abandoned request paged a day later, whatever the operator did.
// A pending record whose lease still held when TTL deleted it (a
// retention shorter than the handler's lease) is the one the alarm is
// for, and still counts; so does one that names no lease.
func TestAbandonedPendingRecordDeletedByTTLDoesNotPage(t *testing.T) {
	deleted := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	pending := func(lease time.Time) stream.StreamRecord {
		old := idemRec("pending", "1")
		if !lease.IsZero() {
			old["leaseAt"] = n(strconv.FormatInt(lease.UnixMilli(), 10))
		}
		return stream.StreamRecord{EventID: "r", EventName: "REMOVE", PrincipalID: stream.TTLPrincipal, IdentityType: "Service",
			Created: deleted, OldImage: old}
	}
	for _, tc := range []struct {
		name  string
		lease time.Time
		want  int
	}{
		{"lease over a day before", deleted.Add(-24 * time.Hour), 0},
		{"lease over a minute before", deleted.Add(-time.Minute), 0},
		{"lease still held", deleted.Add(time.Minute), 1},
		{"no lease named", time.Time{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var metrics, logs bytes.Buffer
			// The auditor reads the deletion late: judged at the deletion.
			a := &Auditor{Metrics: emf.New(&metrics, "idemkit"), Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
				Now: func() time.Time { return deleted.Add(time.Hour) }}
			c := a.Audit(context.Background(), []stream.StreamRecord{pending(tc.lease)})
			if got := c.TTLExpiredPending[TableIdempotency]; got != tc.want {
				t.Errorf("ttl_expired_pending = %d, want %d", got, tc.want)
			}
			if got := strings.Contains(metrics.String(), MetricTTLPending); got != (tc.want == 1) {
				t.Errorf("metric %s emitted = %v, want %v: %s", MetricTTLPending, got, tc.want == 1, metrics.String())
			}
			if tc.want == 0 && !strings.Contains(logs.String(), "audit: TTL deleted an abandoned pending idempotency record") {
				t.Errorf("the abandoned record's deletion is not logged: %s", logs.String())
			}
		})
	}
}
